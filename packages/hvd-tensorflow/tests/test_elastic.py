"""horovod.tensorflow.elastic: the states' save, restore and sync in this process (one rank), across
two ranks (horovod.run), and real elastic jobs through horovodrun in which a worker is killed and
replaced, the survivor going on from its last commit."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import cases_elastic as cases
import horovod.tensorflow as hvd
from tf_testutil import Outcomes, run_batch

pytestmark = pytest.mark.timeout(300)

HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture
def one_rank() -> Iterator[None]:
    """Horovod in this process, alone (no launcher: one rank)."""
    hvd.init()
    assert hvd.size() == 1
    yield
    hvd.shutdown()


# --- the API ---------------------------------------------------------------------------------------


def test_the_names_of_horovod_dot_elastic() -> None:
    import horovod.common.elastic as common
    from horovod.tensorflow.elastic.keras_state import TensorFlowKerasState
    from horovod.tensorflow.elastic.state import TensorFlowState

    assert hvd.elastic.TensorFlowState is TensorFlowState
    assert hvd.elastic.TensorFlowKerasState is TensorFlowKerasState
    assert hvd.elastic.State is common.State and hvd.elastic.ObjectState is common.ObjectState
    assert callable(hvd.elastic.run) and "elastic" in dir(hvd)


# --- one rank, in this process ---------------------------------------------------------------------


def test_variables_restore_to_the_last_commit(one_rank: None) -> None:
    weight = tf.Variable([1.0, 2.0])
    keras_like = tf.Variable(np.arange(6, dtype=np.float64).reshape(2, 3))
    state = hvd.elastic.TensorFlowState([weight, keras_like], step=0, history=[])
    weight.assign([5.0, 6.0])
    state.step, state.history = 1, [1]
    state.restore()  # before any commit: the values the state was made with
    assert weight.numpy().tolist() == [1.0, 2.0] and (state.step, state.history) == (0, [])

    weight.assign([3.0, 4.0])
    state.step = 2
    state.history.append(2)
    state.commit()

    # Changed after the commit, also in place and inside a tf.function: all undone.
    tf.function(lambda: weight.assign_add([10.0, 10.0]))()
    keras_like.assign(tf.zeros((2, 3), tf.float64))
    state.history.append(3)
    state.step = 3
    state.restore()
    assert weight.numpy().tolist() == [3.0, 4.0]
    assert np.array_equal(keras_like.numpy(), np.arange(6, dtype=np.float64).reshape(2, 3))
    assert (state.step, state.history) == (2, [2])


def test_sync_alone_keeps_the_values_and_commits_them(one_rank: None) -> None:
    weight = tf.Variable([1.0, 2.0])
    state = hvd.elastic.TensorFlowState([weight], epoch=4)
    weight.assign([7.0, 8.0])
    state.sync()
    assert weight.numpy().tolist() == [7.0, 8.0] and state.epoch == 4
    weight.assign([0.0, 0.0])
    state.restore()
    assert weight.numpy().tolist() == [7.0, 8.0]


def test_eagerly_variables_must_be_given() -> None:
    with pytest.raises(ValueError, match="needs variables= when executing eagerly"):
        hvd.elastic.TensorFlowState()


def test_keras_state_builds_the_optimizer_and_restores_it(one_rank: None) -> None:
    import keras

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    optimizer = keras.optimizers.SGD(0.1, momentum=0.9)
    model.compile(optimizer=optimizer, loss="mse")
    assert not optimizer.built
    state = hvd.elastic.TensorFlowKerasState(model, epoch=0)  # the optimizer is the model's
    assert state.optimizer is optimizer and optimizer.built
    assert len(optimizer.variables) == 2 + len(model.trainable_variables)  # iterations, rate, momentums

    def train(steps: int) -> None:
        for _ in range(steps):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(tf.ones((4, 3))))
            optimizer.apply_gradients(
                zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables, strict=True)
            )

    train(2)
    state.epoch = 1
    state.commit()
    committed = [v.numpy().copy() for v in model.variables + optimizer.variables]
    train(3)
    state.epoch = 2
    assert int(optimizer.iterations.numpy()) == 5
    state.restore()
    assert int(optimizer.iterations.numpy()) == 2 and state.epoch == 1
    for variable, value in zip(model.variables + optimizer.variables, committed, strict=True):
        assert np.array_equal(variable.numpy(), value), variable.path


def test_keras_state_refuses_to_restore_other_variables(one_rank: None) -> None:
    import keras

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    state = hvd.elastic.TensorFlowKerasState(model)
    state.optimizer = keras.optimizers.SGD(0.1)  # replaced after the commit: more variables now
    with pytest.raises(ValueError, match="variables to restore, but 2 were saved"):
        state.restore()


def test_graph_session_state_alone(one_rank: None) -> None:
    with tf.Graph().as_default(), pytest.raises(ValueError, match="needs the session"):
        hvd.elastic.TensorFlowState()
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        weight = tf.compat.v1.get_variable("w", initializer=tf.constant([1.0, 2.0]))
        session.run(tf.compat.v1.global_variables_initializer())
        with session.as_default():
            state = hvd.elastic.TensorFlowState(step=0)  # the default session, the global variables
        assert state.session is session and state.variables == [weight]
        session.run(weight.assign([3.0, 3.0]))
        state.step = 1
        state.commit()
        session.run(weight.assign([9.0, 9.0]))
        state.restore()
        assert session.run(weight).tolist() == [3.0, 3.0] and state.step == 1
        state.sync()
        assert session.run(weight).tolist() == [3.0, 3.0]


def test_run_restores_and_resets_after_a_lost_peer(one_rank: None) -> None:
    """A lost peer (HorovodInternalError) restores the last commit, re-initialises Horovod and runs
    the function again; TensorFlow's AbortedError from one of hvd's kernels counts as one."""
    weight = tf.Variable(0.0)
    state = hvd.elastic.TensorFlowState([weight], tries=0)
    errors = [
        tf.errors.AbortedError(None, None, "Graph execution error:\n\nlost the peer\n\t [[{{node HvdAllreduce_3}}]]"),
        hvd.HorovodInternalError("lost the peer"),
    ]
    seen: list[tuple[float, int, bool]] = []

    @hvd.elastic.run
    def train(state: hvd.elastic.TensorFlowState, increment: float) -> str:
        seen.append((float(weight.numpy()), state.tries, hvd.is_initialized()))
        weight.assign_add(increment)
        state.tries += 1
        if errors:
            raise errors.pop(0)
        return "done"

    assert train(state, 1.0) == "done"
    assert seen == [(0.0, 0, True)] * 3  # every try from the commit, in a Horovod initialised again
    assert float(weight.numpy()) == 1.0 and hvd.size() == 1


def test_other_errors_of_tensorflow_pass_through(one_rank: None) -> None:
    from horovod.tensorflow.elastic.errors import is_lost_peer

    state = hvd.elastic.TensorFlowState([tf.Variable(0.0)])
    unrelated = tf.errors.AbortedError(None, None, "a queue was closed\n\t [[{{node QueueDequeue}}]]")
    assert not is_lost_peer(unrelated) and not is_lost_peer(ValueError("{{node HvdAllreduce}}"))

    @hvd.elastic.run
    def train(state: hvd.elastic.TensorFlowState) -> None:
        raise unrelated

    with pytest.raises(tf.errors.AbortedError, match="a queue was closed"):
        train(state)


def test_elastic_graphs_reduce_gradients_in_a_world_of_one(one_rank: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tf.function traced by an elastic worker alone still reduces its gradients: the world it
    runs in later may have grown (outside elastic jobs, one rank skips the reduction)."""
    weight = tf.Variable([1.0, 2.0])

    def step() -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(weight * weight)
        return hvd.DistributedGradientTape(tape).gradient(loss, [weight])[0]

    def hvd_ops(function: Any) -> list[str]:
        graph = function.get_concrete_function().graph
        return [op.type for op in graph.get_operations() if op.type.startswith("Hvd")]

    assert hvd_ops(tf.function(step)) == []
    monkeypatch.setenv("HOROVOD_ELASTIC", "1")
    monkeypatch.setenv("HOROVOD_ELASTIC_WORKER_ID", "0")
    elastic_step = tf.function(step)
    assert hvd_ops(elastic_step) == ["HvdAllreduce"]
    assert elastic_step().numpy().tolist() == [2.0, 4.0]


# --- two ranks -------------------------------------------------------------------------------------

CALLS = [
    ("variables_sync", cases.case_variables_sync, ()),
    ("keras_sync_builds_a_new_workers_optimizer", cases.case_keras_sync_builds_a_new_workers_optimizer, ()),
    ("graph_session_sync", cases.case_graph_session_sync, ()),
    ("different_variables_fail_on_every_rank", cases.case_different_variables_fail_on_every_rank, ()),
]


@pytest.fixture(scope="module")
def two_ranks() -> Outcomes:
    return run_batch(CALLS, 2)


@pytest.mark.parametrize("key", [key for key, _, _ in CALLS])
def test_two_ranks(two_ranks: Outcomes, key: str) -> None:
    results = two_ranks.check(key)
    if key == "different_variables_fail_on_every_rank":
        assert results == ["raised", "raised"]


# --- elastic jobs through horovodrun ----------------------------------------------------------------

STEPS = 30
KILL_STEP = 5


def elastic_job(tmp_path: pathlib.Path, mode: str, kill_at: str) -> subprocess.CompletedProcess[str]:
    """tests/elastic_train.py as an elastic job of up to two workers on this host."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env.update(OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0")
    launch = [sys.executable, "-m", "horovod.runner.launch", "-np", "2", "--min-np", "1", "--max-np", "2"]
    script = [sys.executable, str(HERE / "elastic_train.py"), mode, str(tmp_path / "killed"), str(KILL_STEP)]
    return subprocess.run(
        [*launch, "-H", "localhost:2", *script, kill_at, str(STEPS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )


def check_elastic_job(done: subprocess.CompletedProcess[str], tmp_path: pathlib.Path) -> list[dict[str, object]]:
    """The job's checks whatever it trained: the results of the workers that finished."""
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert (tmp_path / "killed").exists(), output
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
        # Every step committed once: none repeated, none skipped, through the loss and the growth.
        assert r["log_ok"] and r["size"] == 2 and int(r["step"]) >= STEPS, r  # type: ignore[call-overload]
    assert len({r["digest"] for r in results}) == 1, results  # the same weights on both
    assert len({r["step"] for r in results}) == 1, results
    return results


def test_elastic_job_of_variables_survives_a_killed_worker(tmp_path: pathlib.Path) -> None:
    """TensorFlowState, eager training; the worker dies before committing a step (its peer loses it
    in the commit)."""
    check_elastic_job(elastic_job(tmp_path, "variables", "commit"), tmp_path)


def test_elastic_job_of_a_keras_model_survives_a_killed_worker(tmp_path: pathlib.Path) -> None:
    """TensorFlowKerasState, training in a tf.function; the worker dies between steps (its peer loses
    it inside the tf.function's gradient reduction: TensorFlow's AbortedError)."""
    results = check_elastic_job(elastic_job(tmp_path, "keras", "step"), tmp_path)
    # The optimizer's step count was committed, restored and synchronised with the rest.
    assert all(r["iterations"] == r["step"] for r in results), results
