"""horovod.keras.elastic: KerasState and the callbacks in this process (one rank, Keras on
TensorFlow), KerasState's sync across two ranks on both backends, and real elastic ``model.fit`` jobs
through horovodrun in which a worker is killed in the middle of an epoch and replaced."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import keras
import numpy as np
import pytest

import cases_elastic as cases
from keras_testutil import BACKENDS, Outcomes, run_batch

pytestmark = pytest.mark.timeout(300)

HERE = pathlib.Path(__file__).resolve().parent
STEPS = 3  # batches per epoch in this process's fits


@pytest.fixture
def hvd() -> Iterator[Any]:
    """horovod.keras, initialised in this process alone (no launcher: one rank)."""
    import horovod.keras as hvd

    hvd.init()
    assert hvd.size() == 1
    yield hvd
    hvd.shutdown()


def model_and_data(hvd: Any) -> tuple[Any, np.ndarray, np.ndarray]:
    keras.utils.set_random_seed(7)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.9)), loss="mse")
    rng = np.random.default_rng(0)
    return model, rng.normal(size=(4 * STEPS, 4)).astype(np.float32), rng.normal(size=(4 * STEPS, 2)).astype(np.float32)


def endless(x: np.ndarray, y: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    while True:
        for i in range(STEPS):
            yield x[4 * i : 4 * i + 4], y[4 * i : 4 * i + 4]


def iterations(model: Any) -> int:
    return int(model.optimizer.iterations.numpy())


class Batches(keras.callbacks.Callback):  # type: ignore[misc]
    """Counts the batches run in each epoch."""

    def __init__(self) -> None:
        super().__init__()
        self.per_epoch: dict[int, int] = {}
        self.epoch = -1

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self.epoch = epoch
        self.per_epoch[epoch] = 0

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self.per_epoch[self.epoch] += 1


def recording_state(hvd: Any, model: Any, **kwargs: Any) -> Any:
    """A KerasState that records (epoch, batch, iterations) at each commit."""

    class Recording(hvd.elastic.KerasState):  # type: ignore[misc, name-defined]
        def save(self) -> None:
            self.commits.append((self.epoch, self.batch, iterations(self.model)))
            super().save()

    state = Recording(model, **kwargs)
    state.commits = []
    return state


# --- the API ---------------------------------------------------------------------------------------


def test_both_import_paths_are_one_implementation() -> None:
    import horovod.keras
    import horovod.keras.elastic
    import horovod.tensorflow.keras
    import horovod.tensorflow.keras.elastic
    from horovod.tensorflow.elastic import TensorFlowKerasState

    names = ["KerasState", "CommitStateCallback", "UpdateBatchStateCallback", "UpdateEpochStateCallback", "run"]
    for name in [*names, "State", "ObjectState"]:
        assert getattr(horovod.keras.elastic, name) is getattr(horovod.tensorflow.keras.elastic, name), name
    assert horovod.keras.elastic is horovod.keras.elastic  # an attribute of the package (loaded on use)
    assert "elastic" in dir(horovod.tensorflow.keras)
    assert issubclass(horovod.keras.elastic.KerasState, TensorFlowKerasState)
    for module in (horovod.keras.elastic, horovod.tensorflow.keras.elastic):
        assert pathlib.Path(str(module.__file__)).read_text().count("\n") < 30  # thin, on purpose


def test_callbacks_refuse_a_state_without_their_attributes(hvd: Any) -> None:
    model, _, _ = model_and_data(hvd)
    state = hvd.elastic.KerasState(model)
    with pytest.raises(ValueError, match=r"create the state with batch=0"):
        hvd.elastic.UpdateBatchStateCallback(state)
    with pytest.raises(ValueError, match=r"create the state with epoch=0"):
        hvd.elastic.UpdateEpochStateCallback(state)
    with pytest.raises(ValueError, match="batches_per_commit must be at least 1"):
        hvd.elastic.CommitStateCallback(state, batches_per_commit=0)


# --- one rank, in this process ---------------------------------------------------------------------


def test_keras_state_restores_the_model_and_optimizer(hvd: Any) -> None:
    model, x, y = model_and_data(hvd)
    state = hvd.elastic.KerasState(model, epoch=0)
    model.fit(x, y, batch_size=4, shuffle=False, verbose=0)
    state.epoch = 1
    state.commit()
    committed = [np.array(v.numpy()) for v in model.variables + model.optimizer.variables]
    model.fit(x, y, batch_size=4, shuffle=False, verbose=0)
    state.epoch = 2
    state.restore()
    assert iterations(model) == STEPS and state.epoch == 1
    for variable, value in zip(model.variables + model.optimizer.variables, committed, strict=True):
        assert np.array_equal(variable.numpy(), value), variable.path


@pytest.mark.parametrize("order", ["horovod", "reversed"])
def test_each_commit_holds_the_batch_and_epoch_of_its_weights(hvd: Any, order: str) -> None:
    """In either order of the callbacks, a commit holds the weights of ``epoch * STEPS + batch``
    updates: the commit of a batch waits until every callback has seen the batch end."""
    model, x, y = model_and_data(hvd)
    state = recording_state(hvd, model, batch=0, epoch=0)
    callbacks = [
        hvd.elastic.CommitStateCallback(state),
        hvd.elastic.UpdateBatchStateCallback(state),
        hvd.elastic.UpdateEpochStateCallback(state),
    ]
    if order == "reversed":
        callbacks.reverse()
    model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0, callbacks=callbacks)
    assert state.commits == [(0, 1, 1), (0, 2, 2), (1, 0, 3), (1, 1, 4), (1, 2, 5), (2, 0, 6)]
    assert (state.epoch, state.batch) == (2, 0)


def test_batches_per_commit_count_across_epochs(hvd: Any) -> None:
    model, x, y = model_and_data(hvd)
    state = recording_state(hvd, model, batch=0, epoch=0)
    callbacks = [
        hvd.elastic.CommitStateCallback(state, batches_per_commit=2),
        hvd.elastic.UpdateBatchStateCallback(state),
        hvd.elastic.UpdateEpochStateCallback(state),
    ]
    model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0, callbacks=callbacks)
    assert state.commits == [(0, 2, 2), (1, 1, 4), (2, 0, 6)]


@pytest.mark.parametrize("data", ["steps_per_epoch", "arrays"])
@pytest.mark.parametrize("resume", ["initial_epoch", "fewer_epochs"])
def test_the_first_epoch_after_a_reset_runs_the_batches_it_had_left(hvd: Any, data: str, resume: str) -> None:
    """Resumed at epoch 1 with 2 of its 3 batches done: epoch 1 runs 1 batch, and training goes on
    (``initial_epoch=state.epoch``, or Horovod's ``epochs=EPOCHS - state.epoch``: 3 epochs in all)."""
    model, x, y = model_and_data(hvd)
    state = hvd.elastic.KerasState(model, batch=2, epoch=1)
    count = Batches()
    callbacks = [
        hvd.elastic.CommitStateCallback(state),
        hvd.elastic.UpdateBatchStateCallback(state),
        hvd.elastic.UpdateEpochStateCallback(state),
        count,
    ]
    inputs: dict[str, Any] = {"x": x, "y": y, "batch_size": 4, "shuffle": False}
    if data == "steps_per_epoch":
        inputs = {"x": endless(x, y), "steps_per_epoch": STEPS, "shuffle": False}
    epochs = {"epochs": 3, "initial_epoch": state.epoch} if resume == "initial_epoch" else {"epochs": 3 - state.epoch}
    model.fit(**inputs, **epochs, verbose=0, callbacks=callbacks)
    first = 1 if resume == "initial_epoch" else 0
    assert count.per_epoch == {first: 1, first + 1: STEPS}
    assert (state.epoch, state.batch, iterations(model)) == (3, 0, 1 + STEPS)
    assert not model.stop_training


def test_a_stop_asked_for_at_the_end_of_a_shortened_epoch_stands(hvd: Any) -> None:
    """A callback after UpdateBatchStateCallback that stops training at an epoch's end (as
    EarlyStopping does) still stops it when that epoch was shortened."""
    model, x, y = model_and_data(hvd)
    state = hvd.elastic.KerasState(model, batch=1, epoch=0)

    class StopAtEpochEnd(keras.callbacks.Callback):  # type: ignore[misc]
        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            self.model.stop_training = True

    count = Batches()
    callbacks = [hvd.elastic.UpdateBatchStateCallback(state), StopAtEpochEnd(), count]
    model.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0, callbacks=callbacks)
    assert count.per_epoch == {0: STEPS - 1}


def test_run_goes_on_from_the_last_commit_after_a_lost_peer(hvd: Any) -> None:
    """``hvd.elastic.run`` around ``model.fit``: a peer lost in the middle of an epoch (simulated,
    before a batch's commit; TensorFlow's AbortedError from hvd's kernels the second time) restores
    the last commit and resumes in that epoch: every update is done exactly once."""
    import tensorflow as tf

    model, x, y = model_and_data(hvd)
    state = hvd.elastic.KerasState(model, batch=0, epoch=0, log=[])
    lost_at = {
        4: hvd.HorovodInternalError("lost the peer"),
        8: tf.errors.AbortedError(None, None, "{{node HvdAllreduce}}"),
    }
    tries = []

    class Train(keras.callbacks.Callback):  # type: ignore[misc]
        def on_train_begin(self, logs: Any = None) -> None:
            tries.append((state.epoch, state.batch, iterations(model), hvd.is_initialized()))

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            state.log.append(iterations(model))
            if iterations(model) in lost_at:
                raise lost_at.pop(iterations(model))

    callbacks = [
        hvd.elastic.CommitStateCallback(state),
        hvd.elastic.UpdateBatchStateCallback(state),
        hvd.elastic.UpdateEpochStateCallback(state),
        Train(),
    ]

    quiet = {"callbacks": callbacks, "verbose": 0}

    @hvd.elastic.run
    def train(state: Any) -> int:
        model.fit(endless(x, y), steps_per_epoch=STEPS, initial_epoch=state.epoch, epochs=4, shuffle=False, **quiet)
        return iterations(model)

    assert train(state) == 4 * STEPS
    assert state.log == list(range(1, 4 * STEPS + 1)) and (state.epoch, state.batch) == (4, 0)
    # Resumed from the commits of iterations 3 (epoch 1, no batch done) and 7 (epoch 2, one batch done).
    assert tries == [(0, 0, 0, True), (1, 0, 3, True), (2, 1, 7, True)]


# --- two ranks, both backends ----------------------------------------------------------------------

CALLS = [("keras_state_sync_then_fit", cases.case_keras_state_sync_then_fit, ())]


@pytest.fixture(scope="module", params=BACKENDS)
def two_ranks(request: pytest.FixtureRequest) -> Outcomes:
    return run_batch(CALLS, 2, request.param)


@pytest.mark.parametrize("key", [key for key, _, _ in CALLS])
def test_two_ranks(two_ranks: Outcomes, key: str) -> None:
    two_ranks.check(key)


# --- elastic jobs through horovodrun ----------------------------------------------------------------

EPOCHS = 4
KILL_ITERATION = 7  # in epoch 1 (5 batches an epoch), two batches done


@pytest.mark.parametrize("backend", BACKENDS)
def test_elastic_fit_survives_a_killed_worker(tmp_path: pathlib.Path, backend: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env.update(KERAS_BACKEND=backend, OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0")
    marker = tmp_path / "killed"
    launch = [sys.executable, "-m", "horovod.runner.launch", "-np", "2", "--min-np", "1", "--max-np", "2"]
    script = [sys.executable, str(HERE / "elastic_fit.py"), str(marker), str(KILL_ITERATION), str(EPOCHS)]
    done = subprocess.run(
        [*launch, "-H", "localhost:2", *script],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert marker.exists(), output
    assert "worker 1 (on localhost, slot 1) failed: its process was killed by signal SIGKILL" in done.stderr, output
    # The survivor went on alone, then the worker that replaced the lost one joined it.
    assert re.search(r"elastic: world [1-9]\d* formed in [0-9.]+ s: 1 worker\(s\)", done.stderr), output
    last = re.findall(r"elastic: world (\d+) formed in [0-9.]+ s: (\d+) worker\(s\)", done.stderr)[-1]
    assert int(last[0]) >= 2 and last[1] == "2", output
    results = [
        json.loads(line.split("RESULT ", 1)[1]) for line in done.stdout.splitlines() if "<stdout>:RESULT " in line
    ]
    assert sorted(r["worker"] for r in results) == ["0", "2"], output
    for r in results:
        # Every update committed once, none repeated or skipped; the epoch the loss interrupted was
        # finished with the batches it had left, so epochs and updates agree.
        assert r["log_ok"] and r["size"] == 2 and r["epoch"] >= EPOCHS and r["batch"] == 0, r
        assert r["iterations"] == r["epoch"] * 5, r
    assert len({r["digest"] for r in results}) == 1, results  # the same model and optimizer on both
    assert len({r["iterations"] for r in results}) == 1, results
