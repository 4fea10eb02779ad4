"""Horovod's elastic Keras callbacks: commit the state, and keep its ``batch`` and ``epoch``.

They work in any order in the callback list. The updates happen where Keras reports progress (a
batch's end, an epoch's end) and the commit waits until every callback has seen that progress: it
happens as the next batch or epoch begins, or as training ends, which is still before any more
training is done. So a commit always holds the weights together with the ``batch`` and ``epoch``
that produced them.

``state.batch`` is the number of batches of the current epoch done, and ``state.epoch`` the number
of epochs done (the epoch to start from). After a reset in the middle of an epoch, resume with
``model.fit(..., initial_epoch=state.epoch)``: the first epoch then runs only the batches it had
left (Keras's ``steps``: ``steps_per_epoch``, or the batches of the data), ended through
``model.stop_training``, which Keras checks after each batch; the callback takes that stop back at
the epoch's end, so that training goes on with the next epoch. With ``steps_per_epoch``, give data
that does not run out (a repeated ``tf.data`` dataset, an endless generator), as Keras asks: Keras
goes on reading where the shortened epoch stopped, so data of exactly ``steps_per_epoch`` batches
would run out in the epoch after it.
"""

from __future__ import annotations

from typing import Any

import keras

from horovod.common.elastic import State


def _require(state: State, attribute: str, callback: str) -> None:
    # Only attributes given to the state when it was made are committed and restored.
    if not hasattr(state, attribute):
        raise ValueError(
            f"{callback} keeps state.{attribute}, which this state lacks: create the state with {attribute}=0 "
            f"(e.g. hvd.elastic.KerasState(model, batch=0, epoch=0))"
        )


class CommitStateCallback(keras.callbacks.Callback):  # type: ignore[misc]  # (Keras is untyped)
    """Commits ``state`` every ``batches_per_commit`` batches (counted across epochs).

    The commit for a batch is made once every callback has handled the batch's end: as the next
    batch or epoch begins, or as training ends. A commit raises ``HostsUpdatedInterrupt`` when the
    hosts changed, which ends ``model.fit`` for ``hvd.elastic.run`` to reset.

    :param state: the elastic state to commit (``hvd.elastic.KerasState``).
    :param batches_per_commit: the number of batches between commits (default 1; ``ValueError`` below 1).
    """

    def __init__(self, state: State, batches_per_commit: int = 1) -> None:
        super().__init__()
        if batches_per_commit < 1:
            raise ValueError(f"batches_per_commit must be at least 1, got {batches_per_commit}")
        self.state: Any = state  # its attributes are the user's (batch, epoch...)
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit
        self._due = False

    def _commit_if_due(self) -> None:
        if self._due:
            self._due = False
            self.state.commit()

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        # A fit that ended with an error (a lost peer) left its count behind: the state was restored.
        """Keras hook, at the start of training.

        :param logs: the metrics Keras passes (may be ``None``).
        """
        self.batches_remaining = self.batches_per_commit
        self._due = False

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        """Keras hook, at the end of each training batch.

        :param batch: the index of the batch within the epoch, as Keras passes it.
        :param logs: the metrics Keras passes (may be ``None``).
        """
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.batches_remaining = self.batches_per_commit
            self._due = True

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        """Keras hook, at the start of each training batch.

        :param batch: the index of the batch within the epoch, as Keras passes it.
        :param logs: the metrics Keras passes (may be ``None``).
        """
        self._commit_if_due()

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        """Keras hook, at the start of each epoch.

        :param epoch: the index of the epoch (from 0), as Keras passes it.
        :param logs: the metrics Keras passes (may be ``None``).
        """
        self._commit_if_due()

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        """Keras hook, at the end of training.

        :param logs: the metrics Keras passes (may be ``None``).
        """
        self._commit_if_due()


class UpdateBatchStateCallback(keras.callbacks.Callback):  # type: ignore[misc]  # (Keras is untyped)
    """Sets ``state.batch`` to the number of batches of the current epoch done, at each batch's end,
    and to 0 at the epoch's end.

    When Keras knows the number of batches per epoch (``steps_per_epoch``, or data of known size),
    the first epoch after a reset is shortened by the batches it had done before: put this callback
    before any callback that stops training from its ``on_epoch_end`` (EarlyStopping), whose stop
    it would otherwise take back with its own.

    :param state: the elastic state, with a ``batch`` attribute (``ValueError`` without).
    """

    def __init__(self, state: State) -> None:
        super().__init__()
        _require(state, "batch", type(self).__name__)
        self.state: Any = state  # its attributes are the user's (batch, epoch...)
        self.steps_per_epoch: int | None = None
        self._done_before = 0
        self._stopped_epoch = False

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        # Non-zero only in the first epoch after a reset (every epoch's end sets it to 0).
        """Keras hook, at the start of each epoch.

        :param epoch: the index of the epoch (from 0), as Keras passes it.
        :param logs: the metrics Keras passes (may be ``None``).
        """
        self._done_before = int(self.state.batch)
        self._stopped_epoch = False
        steps = (self.params or {}).get("steps")
        self.steps_per_epoch = int(steps) if steps else None

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        # `batch` is the index of the epoch's last batch run (Keras's end step).
        """Keras hook, at the end of each training batch.

        :param batch: the index of the batch within the epoch, as Keras passes it.
        :param logs: the metrics Keras passes (may be ``None``).
        """
        self.state.batch = self._done_before + batch + 1
        steps = self.steps_per_epoch
        if self._done_before and steps and self.state.batch >= steps and not self.model.stop_training:
            self.model.stop_training = True  # ends this epoch's batches; taken back at the epoch's end
            self._stopped_epoch = True

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        """Keras hook, at the end of each epoch.

        :param epoch: the index of the epoch (from 0), as Keras passes it.
        :param logs: the metrics Keras passes (may be ``None``).
        """
        self.state.batch = 0
        if self._stopped_epoch:
            self._stopped_epoch = False
            self.model.stop_training = False


class UpdateEpochStateCallback(keras.callbacks.Callback):  # type: ignore[misc]  # (Keras is untyped)
    """Adds 1 to ``state.epoch`` at each epoch's end: the number of epochs done, which is the epoch
    to resume from (``model.fit(..., initial_epoch=state.epoch, epochs=EPOCHS)``, or Horovod's
    ``epochs=EPOCHS - state.epoch``: either way the job trains EPOCHS epochs in all).

    :param state: the elastic state, with an ``epoch`` attribute (``ValueError`` without).
    """

    def __init__(self, state: State) -> None:
        super().__init__()
        _require(state, "epoch", type(self).__name__)
        self.state: Any = state  # its attributes are the user's (batch, epoch...)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        """Keras hook, at the end of each epoch.

        :param epoch: the index of the epoch (from 0), as Keras passes it.
        :param logs: the metrics Keras passes (may be ``None``).
        """
        self.state.epoch = int(self.state.epoch) + 1


__all__ = ["CommitStateCallback", "UpdateBatchStateCallback", "UpdateEpochStateCallback"]
