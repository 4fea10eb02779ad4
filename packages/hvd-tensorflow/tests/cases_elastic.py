"""Elastic states across ranks (run on every rank of a job by tests/test_elastic.py): ``sync()``
makes every rank's state rank 0's, the optimizer of a worker that has not trained yet included,
and ranks keeping different variables fail alike instead of waiting on each other."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd


def _same_on_every_rank(values: list[np.ndarray], what: str) -> None:
    gathered = hvd.allgather_object([np.asarray(v).tolist() for v in values], name=f"same.{what}")
    assert all(g == gathered[0] for g in gathered), f"{what} differ between ranks: {gathered}"


def case_variables_sync() -> None:
    """Eagerly: every rank ends with rank 0's values and attributes, and that is what it restores."""
    hvd.init()
    rank = hvd.rank()
    weight = tf.Variable(np.full((2, 3), rank + 1.0, np.float32))
    count = tf.Variable(rank * 10, dtype=tf.int64)
    state = hvd.elastic.TensorFlowState([weight, count], epoch=rank, history=[rank])
    state.sync()
    _same_on_every_rank([weight.numpy(), count.numpy()], "variables")
    assert np.array_equal(weight.numpy(), np.ones((2, 3), np.float32)) and int(count.numpy()) == 0
    assert (state.epoch, state.history) == (0, [0])
    weight.assign_add(tf.ones((2, 3)))
    state.epoch = 7
    state.restore()  # the synchronised values were kept as the commit
    assert np.array_equal(weight.numpy(), np.ones((2, 3), np.float32)) and state.epoch == 0


def case_keras_sync_builds_a_new_workers_optimizer() -> None:
    """Rank 0 has trained (its optimizer holds momentum and a step count); the other ranks are new
    workers whose optimizer Keras has not built: the state builds it, and the sync gives them all."""
    import keras

    hvd.init()
    rank = hvd.rank()
    keras.utils.set_random_seed(100 + rank)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2), keras.layers.BatchNormalization()])
    optimizer = keras.optimizers.SGD(0.1, momentum=0.9)
    if rank == 0:
        for _ in range(2):
            with tf.GradientTape() as tape:
                x = tf.constant(np.random.default_rng(0).normal(size=(4, 3)), tf.float32)
                loss = tf.reduce_sum(tf.square(model(x, training=True) - 1.0))
            optimizer.apply_gradients(
                zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables, strict=True)
            )
    state = hvd.elastic.TensorFlowKerasState(model, optimizer, batch=rank)
    assert optimizer.built
    state.sync()
    assert int(optimizer.iterations.numpy()) == 2 and state.batch == 0
    _same_on_every_rank([v.numpy() for v in model.variables], "model")
    _same_on_every_rank([v.numpy() for v in optimizer.variables], "optimizer")
    momentums = [v for v in optimizer.variables if "momentum" in v.path]
    assert momentums and all(np.any(v.numpy() != 0) for v in momentums), "rank 0's momentum did not arrive"


def case_graph_session_sync() -> None:
    """In a tf.compat.v1 graph: the global variables, read, written and broadcast through the session."""
    hvd.init()
    rank = hvd.rank()
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        weight = tf.compat.v1.get_variable("w", initializer=tf.constant([1.0, 2.0]) * (rank + 1))
        session.run(tf.compat.v1.global_variables_initializer())
        state = hvd.elastic.TensorFlowState(session=session, step=rank)
        assert state.variables == [weight]
        state.sync()
        assert session.run(weight).tolist() == [1.0, 2.0] and state.step == 0
        session.run(weight.assign([5.0, 5.0]))
        state.restore()
        assert session.run(weight).tolist() == [1.0, 2.0]


def case_different_variables_fail_on_every_rank() -> Any:
    """Rank 1 keeps one variable fewer: every rank raises the same error (no rank waits forever)."""
    hvd.init()
    variables = [tf.Variable(1.0), tf.Variable([1.0, 2.0])]
    state = hvd.elastic.TensorFlowState(variables[: 1 if hvd.rank() == 1 else 2])
    try:
        state.sync()
    except ValueError as error:
        assert "rank(s) 1 keep other variables than rank 0" in str(error), error
        return "raised"
    raise AssertionError("sync() of different variables did not raise")
