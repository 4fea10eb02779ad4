"""An elastic ``model.fit`` job for tests/test_elastic.py: ``horovodrun --min-np 1 --max-np 2 ...
python elastic_fit.py MARKER KILL_ITERATION EPOCHS`` (Keras on the backend KERAS_BACKEND names).

KerasState with the three elastic callbacks, in Horovod's documented order, committing every batch;
a last callback records the optimizer's iteration count in the state after each batch. Worker 1, on
its first life only (MARKER does not exist yet), kills itself with SIGKILL once iteration
KILL_ITERATION, in the middle of an epoch, is committed, as the next batch begins: the survivor
loses it in that batch's gradient reduction (inside the compiled train step on TensorFlow). The
survivor resumes from its last commit in the middle of that epoch (shortened to the batches it had left), and goes
on alone (slowly, leaving the cores to the newcomer's start) until the worker that replaces the
lost one has joined and EPOCHS epochs are done. Each worker that finishes prints ``RESULT {json}``.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any

import keras
import numpy as np

import horovod.keras as hvd

if keras.backend.backend() == "tensorflow":
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
else:
    import torch

    torch.set_num_threads(1)

MARKER, KILL_ITERATION, EPOCHS = pathlib.Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
WORKER = os.environ.get("HOROVOD_ELASTIC_WORKER_ID", "")
STEPS = 5  # batches per epoch
#: Epochs the survivor may train alone, waiting for the new worker, before it gives up waiting.
MAX_EPOCHS_ALONE = 200

hvd.init()
keras.utils.set_random_seed(1000 + int(WORKER or 0))  # weights of its own: the sync makes them rank 0's
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="tanh"), keras.layers.Dense(1)])
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.9)), loss="mse")


def batches() -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Endless data, as Keras asks of an input with steps_per_epoch (data of exactly that many
    batches would run out in the epoch after a shortened one: Keras's iterator goes on where the
    shortened epoch left it)."""
    rng = np.random.default_rng(int(WORKER or 0))
    while True:
        x = rng.normal(size=(8, 4)).astype(np.float32)
        yield x, (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32) + 0.25).astype(np.float32)


state = hvd.elastic.KerasState(model, batch=0, epoch=0, log=[])


class Record(keras.callbacks.Callback):  # type: ignore[misc]
    """Records each iteration in the state; kills worker 1 once; stops when the job is done."""

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        # After the commit of the batch before (CommitStateCallback's, earlier in the list).
        if WORKER == "1" and len(state.log) == KILL_ITERATION and not MARKER.exists():
            MARKER.touch()
            os.kill(os.getpid(), signal.SIGKILL)

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        state.log.append(int(keras.ops.convert_to_numpy(model.optimizer.iterations)))
        if hvd.size() < 2:
            time.sleep(0.02)  # alone: leave the cores to the worker that is starting

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        # Every rank decides alike: the state and the world are the same on all.
        if epoch + 1 >= EPOCHS and hvd.size() == 2:
            model.stop_training = True


callbacks = [
    hvd.elastic.CommitStateCallback(state),
    hvd.elastic.UpdateBatchStateCallback(state),
    hvd.elastic.UpdateEpochStateCallback(state),
    Record(),
]


@hvd.elastic.run
def train(state: Any) -> None:
    model.fit(
        batches(),
        steps_per_epoch=STEPS,
        initial_epoch=state.epoch,
        epochs=EPOCHS + MAX_EPOCHS_ALONE,
        callbacks=callbacks,
        shuffle=False,
        verbose=0,
    )


train(state)
variables = model.variables + model.optimizer.variables
digest = hashlib.sha256(b"".join(np.ascontiguousarray(keras.ops.convert_to_numpy(v)).tobytes() for v in variables))
iterations = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
result = {
    "worker": WORKER,
    "rank": hvd.rank(),
    "size": hvd.size(),
    "epoch": state.epoch,
    "batch": state.batch,
    "iterations": iterations,
    "log_ok": state.log == list(range(1, iterations + 1)),
    "digest": digest.hexdigest(),
}
print("RESULT " + json.dumps(result), flush=True)
