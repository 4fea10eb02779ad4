"""Horovod's Keras callbacks, on Keras 3's public API (any backend).

Values cross ranks as numpy arrays through horovod.common's collectives: a callback runs between
steps, eagerly, where a model's variables are readable and assignable on every backend alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import numpy as np

import horovod.common as hvd_common
from horovod.common.framework_api import Average, size


def broadcast_variables(variables: list[Any], root_rank: int, prefix: str) -> None:
    """Gives every rank ``root_rank``'s values of ``variables`` (all submitted before any is waited for)."""
    # A variable's own numpy(): keras.ops.convert_to_numpy(v.value) goes through tf.Variable's
    # __array__, which NumPy 2 warns about (it takes no `copy` argument).
    handles = [
        hvd_common.broadcast_async(np.array(v.numpy(), order="C"), root_rank, name=f"{prefix}.{i}")
        for i, v in enumerate(variables)
    ]
    for variable, handle in zip(variables, handles, strict=True):
        variable.assign(np.reshape(hvd_common.synchronize(handle), variable.shape))


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):  # type: ignore[misc]  # (Keras is untyped)
    """Broadcasts the model's and the optimizer's variables from ``root_rank`` when training starts,
    so that every rank starts from the same weights (random initialisation, or a checkpoint loaded
    on the root only). An optimizer that Keras builds only at its first update (a custom training
    loop) is broadcast after the first batch, as Horovod does.

    :param root_rank: the rank whose variables every rank gets.
    :param device: accepted as Horovod takes it (the device of the broadcast); ignored.
    :param local_variables: variables each rank keeps as its own (a ``PartialDistributedOptimizer``'s local layers'
        weights): left out of the broadcast, as are those given to ``register_local_var``.
    """

    def __init__(self, root_rank: int, device: str = "", local_variables: Any = None) -> None:
        super().__init__()
        self.root_rank = root_rank
        self.device = device  # accepted as Horovod does
        self.broadcast_done = False
        self._local: set[int] = set()
        for var in [] if local_variables is None else local_variables:
            self.register_local_var(var)

    def register_local_var(self, var: Any) -> None:
        """Leaves ``var`` out of the broadcast: each rank keeps its own value.

        :param var: a variable of the model (a local layer's weight).
        """
        self._local.add(id(var))

    def _broadcast(self) -> None:
        optimizer = getattr(self.model, "optimizer", None)
        variables = list(self.model.variables)
        if optimizer is not None and optimizer.built:
            variables += list(optimizer.variables)
            self.broadcast_done = True
        variables = [v for v in variables if id(v) not in self._local]
        broadcast_variables(variables, self.root_rank, "BroadcastGlobalVariablesCallback")

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        """Keras hook, at the start of training.

        :param logs: the metrics Keras passes (may be ``None``).
        """
        self._broadcast()

    def on_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        """Keras hook, at the end of each training batch.

        :param batch: the index of the batch within the epoch, as Keras passes it.
        :param logs: the metrics Keras passes (may be ``None``).
        """
        if not self.broadcast_done:
            self._broadcast()
            self.broadcast_done = True


class MetricAverageCallback(keras.callbacks.Callback):  # type: ignore[misc]  # (Keras is untyped)
    """Averages the epoch's metrics (``logs``) over the ranks at the end of every epoch, so that
    callbacks after it (ReduceLROnPlateau, TensorBoard, checkpoints) see the job's metrics. Put it
    before those in the callback list.

    :param device: accepted as Horovod takes it (the device of the allreduce); ignored.
    """

    def __init__(self, device: str = "") -> None:
        super().__init__()
        self.device = device  # accepted as Horovod does

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        """Keras hook, at the end of each epoch.

        :param epoch: the index of the epoch (from 0), as Keras passes it.
        :param logs: the metrics Keras passes (may be ``None``).
        """
        if not logs:
            return
        names = sorted(k for k, v in logs.items() if np.ndim(v) == 0 and np.issubdtype(np.asarray(v).dtype, np.number))
        # One allreduce of all the metrics: every rank has the same names (sorted alike).
        values = np.array([float(logs[k]) for k in names], np.float64)
        averaged = hvd_common.allreduce(values, op=Average, name=f"MetricAverageCallback.{epoch}")
        for name, value in zip(names, averaged.tolist(), strict=True):
            logs[name] = value


def _momentum_slots(optimizer: Any) -> list[Any]:
    """The momentum accumulators of an optimizer with a ``momentum`` hyperparameter (SGD, RMSprop)."""
    slots = getattr(optimizer, "momentums", None) or getattr(optimizer, "_momentums", None)
    return list(slots or [])


class LearningRateScheduleCallback(keras.callbacks.Callback):  # type: ignore[misc]  # (Keras is untyped)
    """Sets the learning rate to ``initial_lr * multiplier(epoch)`` from ``start_epoch`` up to (not
    including) ``end_epoch``; ``multiplier`` is a constant or a function of the epoch.

    ``staircase=True`` adjusts at the start of each epoch (integer epochs); ``staircase=False`` at
    the start of each batch, with the epoch as a fraction (``epoch + batch / steps_per_epoch``).
    ``momentum_correction``: when the rate changes from ``lr`` to ``lr'``, an optimizer with momentum
    scales its momentum accumulators by ``lr' / lr``, so the velocity gathered at the old rate
    continues at the new one (Goyal et al.; Horovod scales the momentum coefficient for that one
    update instead, the same update for plain momentum, which a compiled train step could not see).

    :param initial_lr: the learning rate the multiplier scales (usually the optimizer's, already scaled by the number of
        ranks).
    :param multiplier: a constant, or a function of the epoch (a float when ``staircase=False``) returning the factor.
    :param start_epoch: the first epoch the schedule applies to (default 0).
    :param end_epoch: the epoch it stops at, not included (default: never).
    :param staircase: adjust once per epoch (default ``True``) rather than at every batch.
    :param momentum_correction: scale the momentum accumulators when the rate changes (default ``True``).
    :param steps_per_epoch: the number of batches per epoch, for ``staircase=False``; by default what Keras knows of it
        (``ValueError`` at the start of training when it knows nothing).
    """

    def __init__(
        self,
        initial_lr: float,
        multiplier: float | Callable[[float], float],
        start_epoch: int = 0,
        end_epoch: int | None = None,
        staircase: bool = True,
        momentum_correction: bool = True,
        steps_per_epoch: int | None = None,
    ) -> None:
        super().__init__()
        self.initial_lr = float(initial_lr)
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = 0
        if callable(multiplier):
            self.multiplier = multiplier
        else:
            constant = float(multiplier)
            self.multiplier = lambda epoch: constant
            self.staircase = True  # a constant needs no adjustment per batch

    def _in_range(self, epoch: float) -> bool:
        return self.start_epoch <= epoch and (self.end_epoch is None or epoch < self.end_epoch)

    def _optimizer(self) -> Any:
        optimizer = self.model.optimizer
        if optimizer is None:
            raise ValueError(f"{type(self).__name__} needs a compiled model (model.optimizer is None)")
        return optimizer

    def _adjust(self, epoch: float) -> None:
        optimizer = self._optimizer()
        old_lr = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
        new_lr = self.initial_lr * float(self.multiplier(epoch))
        optimizer.learning_rate = new_lr
        if self.momentum_correction and hasattr(optimizer, "momentum") and old_lr > 0 and new_lr != old_lr:
            for slot in _momentum_slots(optimizer):
                slot.assign(slot.value * (new_lr / old_lr))

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        """Keras hook, at the start of training.

        :param logs: the metrics Keras passes (may be ``None``).
        """
        if not self.staircase and not self.steps_per_epoch:
            steps = (self.params or {}).get("steps")
            if not steps:
                raise ValueError(
                    f"{type(self).__name__} with staircase=False needs steps_per_epoch: Keras does not know "
                    "the number of batches per epoch of this input"
                )
            self.steps_per_epoch = int(steps)

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        """Keras hook, at the start of each epoch.

        :param epoch: the index of the epoch (from 0), as Keras passes it.
        :param logs: the metrics Keras passes (may be ``None``).
        """
        self.current_epoch = epoch
        if self.staircase and self._in_range(epoch):
            self._adjust(epoch)

    def on_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        """Keras hook, at the start of each training batch.

        :param batch: the index of the batch within the epoch, as Keras passes it.
        :param logs: the metrics Keras passes (may be ``None``).
        """
        if self.staircase or not self._in_range(self.current_epoch):
            return
        assert self.steps_per_epoch
        self._adjust(self.current_epoch + batch / self.steps_per_epoch)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        """Keras hook, at the end of each epoch.

        :param epoch: the index of the epoch (from 0), as Keras passes it.
        :param logs: the metrics Keras passes (may be ``None``).
        """
        if logs is not None:
            logs["lr"] = float(keras.ops.convert_to_numpy(self._optimizer().learning_rate))


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Raises the learning rate gradually from ``initial_lr / size()`` to ``initial_lr`` over
    ``warmup_epochs`` (adjusted every batch): ``lr(epoch) = initial_lr / size * ((size - 1) / warmup
    * epoch + 1)`` with ``epoch = full epochs + (batch + 1) / steps_per_epoch``, from "Accurate, Large
    Minibatch SGD" (Goyal et al., 2017).

    :param initial_lr: the learning rate reached at the end of the warm-up (usually the base rate times the number of
        ranks).
    :param warmup_epochs: the number of epochs the warm-up lasts (default 5).
    :param momentum_correction: scale the momentum accumulators when the rate changes (default ``True``).
    :param steps_per_epoch: the number of batches per epoch; by default what Keras knows of it.
    :param verbose: above 0, print a line when the warm-up ends.
    """

    def __init__(
        self,
        initial_lr: float,
        warmup_epochs: int = 5,
        momentum_correction: bool = True,
        steps_per_epoch: int | None = None,
        verbose: int = 0,
    ) -> None:
        def multiplier(epoch: float) -> float:
            # Adjusted at the start of a batch for the end of it, as Horovod does: the last batch of
            # the warm-up runs at initial_lr, and every epoch ends on a round value.
            assert self.steps_per_epoch
            epoch += 1.0 / self.steps_per_epoch
            n = size()
            return 1.0 / n * (epoch * (n - 1) / warmup_epochs + 1)

        super().__init__(
            initial_lr,
            multiplier,
            start_epoch=0,
            end_epoch=warmup_epochs,
            staircase=False,
            momentum_correction=momentum_correction,
            steps_per_epoch=steps_per_epoch,
        )
        self.warmup_epochs = warmup_epochs
        self.verbose = verbose

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        """Keras hook, at the end of each epoch.

        :param epoch: the index of the epoch (from 0), as Keras passes it.
        :param logs: the metrics Keras passes (may be ``None``).
        """
        super().on_epoch_end(epoch, logs)
        if epoch == self.warmup_epochs - 1 and self.verbose > 0:
            lr = float(keras.ops.convert_to_numpy(self._optimizer().learning_rate))
            print(f"\nEpoch {epoch + 1}: finished gradual learning rate warmup to {lr:g}.")


__all__ = [
    "BroadcastGlobalVariablesCallback",
    "LearningRateScheduleCallback",
    "LearningRateWarmupCallback",
    "MetricAverageCallback",
    "broadcast_variables",
]


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):  # type: ignore[misc]  # (Keras is untyped)
    """Saves the whole model to ``filepath`` each time ``monitor`` improves, from rank 0 only (the
    ranks' models are the same; one writer keeps the file whole). Horovod's callback, whose Spark
    estimator sets ``filepath`` to its own checkpoint; Keras 3's ModelCheckpoint rules apply to the
    path (a ``.keras`` file; Keras 3.4 and later also take ``.h5``).

    :param monitor: the metric to watch (default ``val_loss``).
    :param verbose: 1 to print a line when the model is saved.
    :param mode: ``auto``, ``min`` or ``max``: whether the metric improves by falling or rising.
    :param save_freq: ``epoch`` (the default), or a number of batches between checks.
    :param filepath: where the model goes (default ``best_model.keras`` in the working directory).
    """

    def __init__(
        self,
        monitor: str = "val_loss",
        verbose: int = 0,
        mode: str = "auto",
        save_freq: Any = "epoch",
        filepath: str = "best_model.keras",
    ) -> None:
        super().__init__(
            filepath,
            monitor=monitor,
            verbose=verbose,
            save_best_only=True,
            save_weights_only=False,
            mode=mode,
            save_freq=save_freq,
        )

    def _save_model(self, epoch: int, batch: int | None, logs: dict[str, Any] | None) -> None:
        if hvd_common.rank() == 0:
            super()._save_model(epoch, batch, logs)
