"""The KerasEstimator's training function, run on every rank, and the byte forms of Keras objects
that travel between the driver, the ranks and the Store.

Each rank rebuilds the model from its ``.keras`` bytes and a fresh optimizer from the user's
optimizer's class and config, wrapped in ``hvd.DistributedOptimizer``; compiles; resumes from the
run's checkpoint when the Store has one; and runs ``model.fit`` on its shard, read batch by batch
from the Parquet data. Rank 0 writes a checkpoint after every epoch (unless the store keeps no run
output) and returns the trained model's ``.keras`` bytes and the history (one dict of metrics per
epoch, averaged over the ranks).

The checkpoint is one file, at ``store.get_checkpoint_path(run_id)``: the compiled model saved as
``.keras`` (weights and optimizer state), with the history added to the zip archive as
``hvd_history.json``. It stays a valid ``.keras`` file (Keras ignores the extra member): copied to
a name ending in ``.keras``, ``keras.saving.load_model`` or ``hvd.load_model`` open it. One write of
one file keeps the weights and the history in step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import itertools
import json
import os
import tempfile
import warnings
import zipfile
from collections.abc import Iterator
from typing import Any

import keras
import numpy as np

from horovod.spark.common.training import DataSpec

#: The member of the checkpoint's zip archive that holds the history.
HISTORY_MEMBER = "hvd_history.json"


@contextlib.contextmanager
def quiet_numpy_copy_warning() -> Iterator[None]:
    """Keras on TensorFlow converts variables with ``np.array(tf_variable)``, which NumPy 2 warns
    about (DeprecationWarning: ``__array__`` takes no ``copy``) on every save: harmless, and an
    error where warnings are errors (pytest's ``filterwarnings = error``)."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r".*__array__ implementation doesn't accept a copy keyword", category=DeprecationWarning
        )
        yield


# --- models and optimizers as bytes ---------------------------------------------------------------


def model_to_bytes(model: Any) -> bytes:
    """The ``.keras`` file of ``model`` (architecture, weights, and the optimizer when compiled)."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.keras")  # Keras picks the format by the suffix
        with quiet_numpy_copy_warning():
            model.save(path)
        with open(path, "rb") as f:
            return f.read()


def model_from_bytes(data: bytes, custom_objects: dict[str, Any] | None, *, compile: bool) -> Any:
    """The model of a ``.keras`` file's bytes; ``compile`` also restores its loss, metrics and optimizer."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.keras")
        with open(path, "wb") as f:
            f.write(data)
        with quiet_numpy_copy_warning():
            return keras.saving.load_model(path, custom_objects=custom_objects or None, compile=compile)


def trained_model_from_bytes(data: bytes, custom_objects: dict[str, Any] | None) -> Any:
    """A trained model for the user: compiled as it was trained (optimizer state included) when its
    loss and metrics can be rebuilt from the file, else uncompiled (a lambda or an unlisted function
    of the user's cannot be: its weights still can, and predictions need nothing else)."""
    try:
        return model_from_bytes(data, custom_objects, compile=True)
    except (TypeError, ValueError):
        return model_from_bytes(data, custom_objects, compile=False)


def base_optimizer_class(optimizer: Any) -> type[Any]:
    """The optimizer's own Keras class: hvd.DistributedOptimizer's classes subclass it, adding ``_hvd``."""
    cls = type(optimizer)
    if getattr(optimizer, "_hvd", None) is not None:
        # A DistributedOptimizer's class is (its mixin, the base): each rank wraps a fresh base again.
        cls = next(base for base in cls.__mro__[1:] if issubclass(base, keras.optimizers.Optimizer))
    return cls


@dataclasses.dataclass(frozen=True)
class OptimizerRecipe:
    """How to make the user's optimizer again: its class and ``get_config()``.

    The class travels with the config (by reference, or by value for a class of the user's script),
    so that a custom optimizer needs no ``custom_objects`` entry; the config is what
    ``keras.optimizers.serialize`` holds. The state (slots, iterations) is not carried: each run
    starts from a fresh optimizer, or from the checkpoint's state when it resumes."""

    cls: type[Any]
    config: dict[str, Any]

    @classmethod
    def of(cls, optimizer: Any) -> OptimizerRecipe:
        return cls(base_optimizer_class(optimizer), optimizer.get_config())

    def make(self, custom_objects: dict[str, Any] | None = None) -> Any:
        # custom_objects: a learning rate schedule of the user's, which the config names.
        return self.cls.from_config(dict(self.config), custom_objects=custom_objects or None)


# --- checkpoints ----------------------------------------------------------------------------------


def checkpoint_bytes(model: Any, history: list[dict[str, float]]) -> bytes:
    """The compiled model's ``.keras`` file with the history added as :data:`HISTORY_MEMBER`."""
    buffer = io.BytesIO(model_to_bytes(model))
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr(HISTORY_MEMBER, json.dumps(history))
    return buffer.getvalue()


def checkpoint_history(data: bytes) -> list[dict[str, float]]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        if HISTORY_MEMBER not in archive.namelist():
            raise ValueError(f"the checkpoint has no {HISTORY_MEMBER}: it was not written by the KerasEstimator")
        return list(json.loads(archive.read(HISTORY_MEMBER)))


def load_checkpoint(model: Any, data: bytes) -> list[dict[str, float]]:
    """Restores a compiled model's weights and optimizer state from a checkpoint; returns its history."""
    history = checkpoint_history(data)
    # Keras loads the optimizer's saved variables only into an optimizer that has them already.
    model.optimizer.build(model.trainable_variables)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "checkpoint.keras")
        with open(path, "wb") as f:
            f.write(data)
        model.load_weights(path)
    return history


# --- the training function ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class KerasSpec:
    """Everything a rank needs, from the Estimator's params (pickled to the ranks)."""

    data: DataSpec
    run_id: str
    model: bytes  # the .keras file of the user's model
    custom_objects: dict[str, Any] | None
    optimizer: OptimizerRecipe
    loss: Any  # as model.compile takes it: one loss, or a list with one per output
    loss_weights: Any
    metrics: Any  # a list, or a list per output
    callbacks: list[Any]
    compression: Any
    epochs: int
    verbose: int


def keras_batch(data: DataSpec, batch: dict[str, np.ndarray]) -> tuple[Any, Any, np.ndarray]:
    """``(x, y, sample_weight)`` as ``model.fit`` takes them: one array per input and per output,
    a tuple of them for several; the weights are the batch's (0 for a padding row)."""
    features, labels, weights = data.split(batch)
    x = features[0] if len(features) == 1 else tuple(features)
    y = labels[0] if len(labels) == 1 else tuple(labels)
    return x, y, weights


def batches_forever(data: DataSpec, reader: Any, steps: int, first_epoch: int) -> Iterator[tuple[Any, Any, np.ndarray]]:
    """Epoch after epoch of ``steps`` batches: Keras keeps drawing from one generator for every epoch
    of a fit (``steps_per_epoch`` at a time), so it must never run out."""
    for epoch in itertools.count(first_epoch):
        for batch in data.batches(reader, epoch, steps):
            yield keras_batch(data, batch)


class EpochRecorder(keras.callbacks.Callback):  # type: ignore[misc]  # (Keras is untyped)
    """Appends every epoch's metrics to ``history``; on rank 0 (``store`` given) then writes the
    checkpoint. Put after MetricAverageCallback, so that it records the metrics of every rank's rows."""

    def __init__(self, history: list[dict[str, float]], store: Any = None, path: str | None = None) -> None:
        super().__init__()
        self.history = history
        self.store = store
        self.path = path

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.history.append({name: float(value) for name, value in (logs or {}).items() if np.ndim(value) == 0})
        if self.store is not None and self.path is not None:
            self.store.write(self.path, checkpoint_bytes(self.model, self.history))


def train(spec: KerasSpec) -> dict[str, Any] | None:
    import horovod.keras as hvd

    hvd.init()
    try:
        return _train(spec, hvd)
    finally:
        hvd.shutdown()


def compiled_model(spec: KerasSpec, hvd: Any) -> Any:
    """The user's model, compiled with a fresh DistributedOptimizer, the loss(es) and metrics."""
    model = model_from_bytes(spec.model, spec.custom_objects, compile=False)
    ensure_built(model, spec.data)
    optimizer = hvd.DistributedOptimizer(
        spec.optimizer.make(spec.custom_objects), compression=spec.compression or hvd.Compression.none
    )
    # Without a sample weight column the only weights are the readers' padding rows (0): weighted
    # metrics leave them out. With one, metrics stay unweighted, as Keras (and Horovod) define them.
    metrics_arg = "metrics" if spec.data.sample_weight_col else "weighted_metrics"
    model.compile(optimizer=optimizer, loss=spec.loss, loss_weights=spec.loss_weights, **{metrics_arg: spec.metrics})
    return model


def ensure_built(model: Any, data: DataSpec) -> None:
    """Builds a model given unbuilt (a Sequential without an Input, a subclassed model) by calling
    it on one row of zeros shaped as the feature columns, as ``fit`` would on its first batch: a
    checkpoint can only be loaded into weights that exist."""
    if model.built and model.weights:
        return
    specs = [data.meta.columns[c] for c in data.feature_cols]
    zeros = [np.zeros((1, *spec.shape), dtype=spec.dtype) for spec in specs]
    model(zeros[0] if len(zeros) == 1 else zeros, training=False)


def restore(spec: KerasSpec, model: Any) -> list[dict[str, float]]:
    """The history so far, the model and optimizer restored, when the run has a checkpoint."""
    store = spec.data.store
    path = store.get_checkpoint_path(spec.run_id)
    if not store.exists(path):
        return []
    return load_checkpoint(model, store.read(path))


def _train(spec: KerasSpec, hvd: Any) -> dict[str, Any] | None:
    rank, size = hvd.rank(), hvd.size()
    model = compiled_model(spec, hvd)
    history = restore(spec, model)  # on every rank: each builds the same optimizer variables
    initial_epoch = len(history)
    if initial_epoch < spec.epochs:  # the same on every rank: all train, or none does
        _fit(spec, hvd, model, history, rank, size)
    if rank != 0:
        return None
    return {"model": model_to_bytes(model), "history": history}


def _fit(spec: KerasSpec, hvd: Any, model: Any, history: list[dict[str, float]], rank: int, size: int) -> None:
    data, initial_epoch = spec.data, len(history)
    train_reader, val_reader = data.train_reader(rank, size), data.val_reader(rank, size)
    train_steps = data.train_steps(train_reader)
    # Rank 0 writes the checkpoints, unless the store keeps no run output (save_runs=False).
    store = data.store if rank == 0 and data.store.saving_runs() else None
    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),  # random or restored weights: rank 0's everywhere
        hvd.callbacks.MetricAverageCallback(),
        *spec.callbacks,
        EpochRecorder(history, store, data.store.get_checkpoint_path(spec.run_id) if store is not None else None),
    ]
    validation: dict[str, Any] = {}
    if val_reader is not None:
        val_steps = data.val_steps(val_reader)
        validation = {
            "validation_data": batches_forever(data, val_reader, val_steps, initial_epoch),
            "validation_steps": val_steps,
        }
    model.fit(
        batches_forever(data, train_reader, train_steps, initial_epoch),
        steps_per_epoch=train_steps,
        epochs=spec.epochs,
        initial_epoch=initial_epoch,
        callbacks=callbacks,
        verbose=spec.verbose if rank == 0 else 0,
        shuffle=False,  # the readers shuffle; Keras refuses (warns) to shuffle a generator
        **validation,
    )
