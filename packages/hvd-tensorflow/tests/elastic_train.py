"""An elastic training job for tests/test_elastic.py: ``horovodrun --min-np 1 --max-np 2 ... python
elastic_train.py MODE MARKER KILL_STEP KILL_AT STEPS``.

MODE "variables": TensorFlowState over two tf.Variables, trained eagerly; MODE "keras":
TensorFlowKerasState over a Keras model and its SGD with momentum, trained by a tf.function (hvd's
kernels). Every step is committed and recorded in the state. Worker 1, on its first life only
(MARKER does not exist yet), kills itself with SIGKILL: KILL_AT "commit": after step KILL_STEP,
before committing it (the survivor loses it in the commit's collective); KILL_AT "step": once step
KILL_STEP is committed, before the next (the survivor loses it in the step's gradient reduction,
inside the tf.function in MODE "keras"). The survivor goes on alone until the worker that replaces
it has joined (it trains slowly meanwhile, leaving the cores to the newcomer's start), so the job
ends in a world of two that formed after the loss. Each worker that finishes prints one line:
``RESULT {json}``.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import signal
import sys
import time

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

MODE, MARKER, KILL_AT = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[4]
KILL_STEP, STEPS = int(sys.argv[3]), int(sys.argv[5])
WORKER = os.environ.get("HOROVOD_ELASTIC_WORKER_ID", "")
#: Steps the survivor may take alone, waiting for the new worker, before it gives up waiting.
MAX_STEPS_ALONE = 3000

hvd.init()
# Every worker starts from weights of its own: the state's sync must make them rank 0's.
seed = 1000 + int(WORKER or 0)


def data(step: int, rank: int) -> tuple[tf.Tensor, tf.Tensor]:
    rng = np.random.default_rng(step * 10 + rank)
    x = rng.normal(size=(8, 4)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32) + 0.25).astype(np.float32)
    return tf.constant(x), tf.constant(y)


if MODE == "variables":
    weight = tf.Variable(np.random.default_rng(seed).normal(size=(4, 1)).astype(np.float32))
    bias = tf.Variable(np.zeros((1,), np.float32))
    tracked = [weight, bias]
    state = hvd.elastic.TensorFlowState(tracked, step=0, log=[])

    def train_step(x: tf.Tensor, y: tf.Tensor) -> None:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(x @ weight + bias - y))
        tape = hvd.DistributedGradientTape(tape)
        for variable, gradient in zip(tracked, tape.gradient(loss, tracked), strict=True):
            variable.assign_sub(0.05 * gradient)

    def weights() -> list[np.ndarray]:
        return [v.numpy() for v in tracked]

    def iterations() -> int:
        return -1

else:
    assert MODE == "keras", MODE
    import keras

    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="tanh"), keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD(0.05, momentum=0.9)
    # The optimizer is not built yet (no step was taken): the state builds it, on every worker alike.
    state = hvd.elastic.TensorFlowKerasState(model, optimizer, step=0, log=[])

    @tf.function
    def train_step(x: tf.Tensor, y: tf.Tensor) -> None:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        tape = hvd.DistributedGradientTape(tape)
        optimizer.apply_gradients(
            zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables, strict=True)
        )

    def weights() -> list[np.ndarray]:
        return [np.asarray(v.numpy()) for v in model.variables + optimizer.variables]

    def iterations() -> int:
        return int(optimizer.iterations.numpy())


def kill_once(step: int) -> None:
    if WORKER == "1" and step == KILL_STEP and not MARKER.exists():
        MARKER.touch()
        os.kill(os.getpid(), signal.SIGKILL)


@hvd.elastic.run
def train(state: hvd.elastic.State) -> None:
    while state.step < STEPS or (hvd.size() < 2 and state.step < STEPS + MAX_STEPS_ALONE):
        if KILL_AT == "step":
            kill_once(state.step)
        train_step(*data(state.step, hvd.rank()))
        state.step += 1
        state.log.append(state.step)
        if KILL_AT == "commit":
            kill_once(state.step)
        if hvd.size() < 2:
            time.sleep(0.02)  # alone: leave the cores to the worker that is starting
        state.commit()


train(state)
digest = hashlib.sha256(b"".join(np.ascontiguousarray(w).tobytes() for w in weights())).hexdigest()
result = {
    "worker": WORKER,
    "rank": hvd.rank(),
    "size": hvd.size(),
    "step": state.step,
    "log_ok": state.log == list(range(1, state.step + 1)),
    "iterations": iterations(),
    "digest": digest,
}
print("RESULT " + json.dumps(result), flush=True)
