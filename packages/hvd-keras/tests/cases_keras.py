"""What horovod.keras must do, run on every rank of a job (Keras on TensorFlow or on torch).

Every rank can compute every rank's data, so each case checks its results against a reference it
computes by itself (single-process training on the combined batches, Horovod's formulas) or
against the other ranks' (allgather_object).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from keras_testutil import dataset, shard

BATCH = 4


def _iterations(optimizer: Any) -> int:
    """The optimizer's step count (its ``iterations`` variable has no ``__int__`` in Keras 3.3)."""
    import keras

    return int(keras.ops.convert_to_numpy(optimizer.iterations))


def _model(seed: int) -> Any:
    import keras

    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((6,)), keras.layers.Dense(5, activation="tanh"), keras.layers.Dense(2)])


def _weights(model: Any) -> list[np.ndarray]:
    return [np.asarray(w) for w in model.get_weights()]


def _same_on_every_rank(values: list[np.ndarray], what: str) -> None:
    import horovod.keras as hvd

    gathered = hvd.allgather_object([v.tolist() for v in values], name=f"same.{what}")
    assert all(g == gathered[0] for g in gathered), f"{what} differ between ranks"


def _fit_against_single_process(
    make_model: Any, members: list[int], passes: int = 1, atol: float = 1e-5, **options: Any
) -> Any:
    """Trains ``make_model()`` with DistributedOptimizer(SGD, **options) on this rank's shard (the
    ranks ``members`` share the data), and checks its weights against one process training a
    model made alike on the combined batches, with plain SGD; returns the distributed model."""
    import keras

    import horovod.keras as hvd

    n, position = len(members), members.index(hvd.rank())
    updates = 3
    x, y = dataset(updates * passes * n * BATCH)
    model = make_model()
    sgd = keras.optimizers.SGD(0.05, momentum=0.5)
    opt = hvd.DistributedOptimizer(sgd, backward_passes_per_step=passes, average_aggregated_gradients=True, **options)
    assert isinstance(opt, keras.optimizers.SGD) and opt is not sgd
    model.compile(optimizer=opt, loss="mse")
    model.fit(shard(x, position, n, BATCH), shard(y, position, n, BATCH), batch_size=BATCH, shuffle=False, verbose=0)
    assert _iterations(opt) == updates, _iterations(opt)

    reference = make_model()
    reference.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.5), loss="mse")
    rows = passes * n * BATCH
    for u in range(updates):
        reference.train_on_batch(x[u * rows : (u + 1) * rows], y[u * rows : (u + 1) * rows])
    for got, want in zip(_weights(model), _weights(reference), strict=True):
        assert np.allclose(got, want, atol=atol), (options, got.ravel()[:4], want.ravel()[:4])
    return model


def case_fit_matches_single_process(passes: int) -> None:
    """model.fit with DistributedOptimizer on each rank's shard gives, on every rank, the weights of
    one process training on the combined batches (``passes`` steps of every rank per update)."""
    import horovod.keras as hvd

    hvd.init()
    model = _fit_against_single_process(lambda: _model(seed=0), list(range(hvd.size())), passes)
    _same_on_every_rank(_weights(model), f"weights.{passes}")


def _embedding_model() -> Any:
    import keras

    keras.utils.set_random_seed(0)
    inputs = keras.Input((6,))
    ids = keras.layers.Lambda(lambda t: keras.ops.cast(keras.ops.abs(t[:, :2]) * 4, "int32") % 8)(inputs)
    embedded = keras.layers.Flatten()(keras.layers.Embedding(8, 3)(ids))
    return keras.Model(inputs, keras.layers.Dense(2)(keras.layers.Concatenate()([embedded, inputs])))


def case_optimizer_options() -> None:
    """Grouped gradients (a count, or lists of variables), predivision, fp16 compression, sparse
    gradients (an embedding's, on TensorFlow), and a process set give the reference's weights."""
    import horovod.keras as hvd

    hvd.init()
    everyone = list(range(hvd.size()))
    _fit_against_single_process(lambda: _model(seed=0), everyone, num_groups=2)
    # Groups list the trained model's own variables: that model is made first, the reference after.
    trained = _model(seed=0)
    models = iter([trained])
    groups = [list(trained.layers[0].trainable_variables), list(trained.layers[1].trainable_variables)]
    _fit_against_single_process(lambda: next(models, None) or _model(seed=0), everyone, groups=groups)
    _fit_against_single_process(lambda: _model(seed=0), everyone, gradient_predivide_factor=2.0)
    _fit_against_single_process(lambda: _model(seed=0), everyone, atol=2e-2, compression=hvd.Compression.fp16)
    for sparse_as_dense in (False, True):
        _fit_against_single_process(_embedding_model, everyone, sparse_as_dense=sparse_as_dense)
    if hvd.size() >= 3:  # a set smaller than the world: the first rank and the last
        members = [0, hvd.size() - 1]
        pair = hvd.add_process_set(members)
        if hvd.rank() in members:
            # Named: unnamed gradients are numbered per name in program order, and only the set's
            # members run this; the other ranks' numbering must not fall behind theirs.
            _fit_against_single_process(lambda: _model(seed=0), members, process_set=pair, name="pair")
        hvd.barrier()
        hvd.remove_process_set(pair)


def case_broadcast_callback() -> None:
    """Ranks initialised differently start from the root's weights (the root: the last rank)."""
    import keras

    import horovod.keras as hvd

    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    root = n - 1
    model = _model(seed=100 + rank)
    initial = hvd.broadcast_object([w.tolist() for w in _weights(model)], root_rank=root, name="root.initial")
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.0, momentum=0.9)), loss="mse")
    x, y = dataset(2 * BATCH, seed=rank)  # each rank's own data: only the broadcast can make them equal
    model.fit(x, y, batch_size=BATCH, verbose=0, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(root)])
    assert [w.tolist() for w in _weights(model)] == initial  # a learning rate of 0 keeps the root's weights
    _same_on_every_rank([np.asarray(v) for v in model.optimizer.variables], "optimizer")


class _Recorder:
    """A Keras callback recording the logs it sees at the end of each epoch, and the learning rate
    and first momentum value at the start and end of each batch."""

    def __new__(cls) -> Any:
        import keras

        class Recorder(keras.callbacks.Callback):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__()
                self.epoch_logs: list[dict[str, float]] = []
                self.batches: list[tuple[int, int, float, float, float]] = []
                self.epoch = 0
                self._begin: tuple[float, float] = (0.0, 0.0)

            def _momentum(self) -> float:
                slots = getattr(self.model.optimizer, "momentums", None)
                return float(np.asarray(slots[0].value).ravel()[0]) if slots else 0.0

            def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
                self.epoch = epoch

            def on_batch_begin(self, batch: int, logs: Any = None) -> None:
                lr = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
                self._begin = (lr, self._momentum())

            def on_batch_end(self, batch: int, logs: Any = None) -> None:
                self.batches.append((self.epoch, batch, *self._begin, self._momentum()))

            def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
                self.epoch_logs.append({k: float(v) for k, v in (logs or {}).items()})

        return Recorder()


def case_metric_average() -> None:
    """After MetricAverageCallback, the epoch's logs are the mean of the ranks' own."""
    import keras

    import horovod.keras as hvd

    hvd.init()
    rank = hvd.rank()
    model = _model(seed=0)
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01)), loss="mse", metrics=["mae"])
    before, after = _Recorder(), _Recorder()
    x, y = dataset(3 * BATCH, seed=10 + rank)  # every rank's loss differs
    callbacks = [before, hvd.callbacks.MetricAverageCallback(), after]
    model.fit(x, y, batch_size=BATCH, epochs=2, verbose=0, callbacks=callbacks)
    everyone = hvd.allgather_object(before.epoch_logs, name="metric.raw")
    for epoch, averaged in enumerate(after.epoch_logs):
        for name in ("loss", "mae"):
            mean = float(np.mean([logs[epoch][name] for logs in everyone]))
            assert np.isclose(averaged[name], mean, rtol=1e-5), (name, averaged[name], mean)
        assert len({logs[epoch]["loss"] for logs in everyone}) == len(everyone)  # the ranks' own did differ


def case_learning_rate_callbacks() -> None:
    """Warm-up and schedule set Horovod's learning rates, batch by batch and epoch by epoch, and
    momentum correction scales the momentum by the change of rate."""
    import keras

    import horovod.keras as hvd

    hvd.init()
    n = hvd.size()
    steps, warmup, lr = 4, 2, 0.1
    x, y = dataset(steps * BATCH)

    model = _model(seed=0)
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(lr, momentum=0.9)), loss="mse")
    record = _Recorder()
    warm = hvd.callbacks.LearningRateWarmupCallback(lr, warmup_epochs=warmup, verbose=0)
    model.fit(x, y, batch_size=BATCH, epochs=3, shuffle=False, verbose=0, callbacks=[warm, record])
    previous_end = None
    for epoch, batch, begin_lr, begin_momentum, end_momentum in record.batches:
        progress = min(epoch + (batch + 1) / steps, warmup)  # unchanged after the warm-up
        expected = lr / n * (progress * (n - 1) / warmup + 1)
        assert np.isclose(begin_lr, expected, rtol=1e-5), (epoch, batch, begin_lr, expected)
        if previous_end is not None:  # the momentum follows the rate: v * lr' / lr
            last_lr, last_momentum = previous_end
            assert np.isclose(begin_momentum, last_momentum * begin_lr / last_lr, rtol=1e-4, atol=1e-7)
        previous_end = (begin_lr, end_momentum)
    assert np.isclose(record.batches[-1][2], lr)  # the warm-up ended at the full rate

    model = _model(seed=0)
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(lr)), loss="mse")
    record = _Recorder()
    schedule = hvd.callbacks.LearningRateScheduleCallback(lr, lambda epoch: 0.5**epoch, start_epoch=1, end_epoch=3)
    constant = hvd.callbacks.LearningRateScheduleCallback(lr, 0.1, start_epoch=4)
    model.fit(x, y, batch_size=BATCH, epochs=5, verbose=0, callbacks=[schedule, constant, record])
    by_epoch = {epoch: begin_lr for epoch, _, begin_lr, _, _ in record.batches}
    expected_by_epoch = {0: lr, 1: lr * 0.5, 2: lr * 0.25, 3: lr * 0.25, 4: lr * 0.1}
    assert all(np.isclose(by_epoch[e], v) for e, v in expected_by_epoch.items()), by_epoch
    assert np.isclose(record.epoch_logs[-1]["lr"], lr * 0.1), record.epoch_logs[-1]


def case_load_model_round_trip(directory: str) -> None:
    """A model saved by rank 0 loads on every rank with its optimizer distributed and its state as
    saved, and training goes on identically on every rank."""
    import keras

    import horovod.keras as hvd

    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    path = os.path.join(directory, f"model-{keras.backend.backend()}-{n}.keras")
    x, y = dataset(2 * n * BATCH)
    model = _model(seed=0)
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.9)), loss="mse")
    model.fit(shard(x, rank, n, BATCH), shard(y, rank, n, BATCH), batch_size=BATCH, shuffle=False, verbose=0)
    if rank == 0:
        model.save(path)
    hvd.barrier()
    loaded = hvd.load_model(path)
    optimizer = loaded.optimizer
    assert isinstance(optimizer, keras.optimizers.SGD) and hasattr(optimizer, "_hvd"), type(optimizer).__mro__
    assert _iterations(optimizer) == _iterations(model.optimizer) == 2
    for got, want in zip(optimizer.variables, model.optimizer.variables, strict=True):
        assert np.allclose(np.asarray(got), np.asarray(want)), got.path
    loaded.fit(shard(x, rank, n, BATCH), shard(y, rank, n, BATCH), batch_size=BATCH, shuffle=False, verbose=0)
    assert _iterations(optimizer) == 4
    _same_on_every_rank(_weights(loaded), "loaded")
    plain = keras.saving.load_model(path)  # loads without hvd too: saved as the base optimizer
    assert isinstance(plain.optimizer, keras.optimizers.SGD) and not hasattr(plain.optimizer, "_hvd")


def case_misuse(directory: str) -> None:
    """Wrapping twice, a Keras 2 (or framework) optimizer object, and loading a model whose
    optimizer class is unknown each raise a clear error."""
    import keras

    import horovod.keras as hvd

    hvd.init()
    opt = hvd.DistributedOptimizer(keras.optimizers.Adam(0.01))
    _raises(ValueError, "already a DistributedOptimizer", lambda: hvd.DistributedOptimizer(opt))
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        other = tf.compat.v1.train.GradientDescentOptimizer(0.1)
    else:
        import torch

        other = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    _raises(TypeError, "Keras 3 optimizers", lambda: hvd.DistributedOptimizer(other))

    class HalvedSGD(keras.optimizers.SGD):  # type: ignore[misc]  # a class of the user's, unknown to Keras
        pass

    model = _model(seed=0)
    model.compile(optimizer=hvd.DistributedOptimizer(HalvedSGD(0.01)), loss="mse")
    model.fit(*dataset(BATCH), verbose=0)
    path = os.path.join(directory, f"custom-{keras.backend.backend()}-{hvd.size()}-{hvd.rank()}.keras")
    model.save(path)
    _raises(ValueError, "custom_optimizers", lambda: hvd.load_model(path))
    loaded = hvd.load_model(path, custom_optimizers=[HalvedSGD])
    assert isinstance(loaded.optimizer, HalvedSGD) and hasattr(loaded.optimizer, "_hvd")


def _raises(kind: type[BaseException], fragment: str, call: Any) -> None:
    try:
        call()
    except kind as error:
        assert fragment in str(error), str(error)
    else:
        raise AssertionError(f"expected {kind.__name__} mentioning {fragment!r}")


def case_partial_optimizer() -> None:
    """PartialDistributedOptimizer: the shared layer's gradients are averaged over the ranks; the
    local layer's stay on each rank, divided by the size (scale_local_gradients, Horovod's rule);
    BroadcastGlobalVariablesCallback(local_variables=...) leaves the local layer's weights alone."""
    import keras

    import horovod.keras as hvd

    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    lr = 0.1

    def make(seed: int) -> tuple[Any, Any]:
        keras.utils.set_random_seed(seed)
        local = keras.layers.Dense(2, name="local")
        return keras.Sequential([keras.Input((6,)), keras.layers.Dense(3, name="shared"), local]), local

    model, local = make(300 + rank)
    shared_start = hvd.broadcast_object([w.tolist() for w in _weights(model)[:2]], root_rank=0, name="partial.root")
    local_starts = hvd.allgather_object([w.tolist() for w in _weights(model)[2:]], name="partial.local")
    opt = hvd.PartialDistributedOptimizer(keras.optimizers.SGD(lr), local_layers=[local])
    model.compile(optimizer=opt, loss="mse")
    keep = hvd.callbacks.BroadcastGlobalVariablesCallback(0, local_variables=local.trainable_weights)
    x, y = dataset(BATCH, seed=rank)  # each rank's own batch
    model.fit(x, y, batch_size=BATCH, verbose=0, callbacks=[keep])

    # One plain SGD step per rank, from the shared start and that rank's own local weights.
    shared_steps, local_step = [], None
    for r in range(n):
        reference, _ = make(0)
        start = [np.asarray(w) for w in shared_start] + [np.asarray(w) for w in local_starts[r]]
        reference.set_weights(start)
        reference.compile(optimizer=keras.optimizers.SGD(lr), loss="mse")
        reference.train_on_batch(*dataset(BATCH, seed=r))
        after = _weights(reference)
        shared_steps.append(after[:2])
        if r == rank:
            local_step = [s + (a - s) / n for s, a in zip(start[2:], after[2:], strict=True)]
    got = _weights(model)
    for g, w in zip(got[:2], [np.mean([s[i] for s in shared_steps], axis=0) for i in range(2)], strict=True):
        assert np.allclose(g, w, atol=1e-5), ("shared", g.ravel()[:3], w.ravel()[:3])
    for g, w in zip(got[2:], local_step, strict=True):
        assert np.allclose(g, w, atol=1e-5), ("local", g.ravel()[:3], w.ravel()[:3])
    _same_on_every_rank(got[:2], "partial.shared")
    gathered = hvd.allgather_object([w.tolist() for w in got[2:]], name="partial.local.after")
    assert n == 1 or gathered[0] != gathered[1], "the local layer must differ between ranks"


def case_best_model_checkpoint(directory: str) -> None:
    """BestModelCheckpoint saves the whole model when val_loss improves, from rank 0 only; its path
    follows Keras 3's rule (a .keras file)."""
    import keras

    import horovod.keras as hvd

    hvd.init()
    rank = hvd.rank()
    model = _model(seed=7)
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05)), loss="mse")
    path = os.path.join(directory, f"best.rank{rank}.keras")  # one path per rank: who saved shows
    checkpoint = hvd.callbacks.BestModelCheckpoint(filepath=path)
    x, y = dataset(4 * BATCH, seed=rank)
    model.fit(x, y, batch_size=BATCH, epochs=3, verbose=0, validation_data=(x, y), callbacks=[checkpoint])
    assert os.path.exists(path) == (rank == 0), (rank, os.listdir(directory))
    if rank == 0:
        assert keras.saving.load_model(path).count_params() == model.count_params()
    try:
        hvd.callbacks.BestModelCheckpoint(filepath=os.path.join(directory, "best.ckpt"))
    except ValueError as error:
        assert ".keras" in str(error), error
    else:
        raise AssertionError("a checkpoint path without .keras was accepted")
