"""Data-parallel training of a small MLP on scikit-learn's digits, with numpy and horovod.common.

Each rank trains on its shard of the data; gradients are averaged with allreduce, so every rank
keeps identical weights. Run with a launcher (every process calls train()), or directly: then two
ranks run as threads of this process, connected in memory.
"""

from __future__ import annotations

import os

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import horovod.common as hvd

EPOCHS, BATCH, LEARNING_RATE, HIDDEN = 25, 32, 0.3, 64


def _forward(params: dict, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    hidden = np.maximum(x @ params["w1"] + params["b1"], 0.0)
    logits = hidden @ params["w2"] + params["b2"]
    logits -= logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    return hidden, probs / probs.sum(axis=1, keepdims=True)


def _gradients(params: dict, x: np.ndarray, y: np.ndarray) -> tuple[float, dict]:
    hidden, probs = _forward(params, x)
    loss = -np.log(probs[np.arange(len(y)), y] + 1e-12).mean()
    d_logits = probs
    d_logits[np.arange(len(y)), y] -= 1.0
    d_logits /= len(y)
    d_hidden = (d_logits @ params["w2"].T) * (hidden > 0)
    grads = {"w2": hidden.T @ d_logits, "b2": d_logits.sum(0), "w1": x.T @ d_hidden, "b1": d_hidden.sum(0)}
    return float(loss), grads


def train() -> dict:
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(x, digits.target, test_size=0.2, random_state=0)
    shard = slice(rank, None, size)  # each rank sees a different part of the training data
    x_train, y_train = x_train[shard], y_train[shard]

    rng = np.random.default_rng(rank)  # deliberately different: broadcast makes them equal
    params = {
        "w1": rng.normal(0, 0.1, (64, HIDDEN)).astype(np.float32),
        "b1": np.zeros(HIDDEN, np.float32),
        "w2": rng.normal(0, 0.1, (HIDDEN, 10)).astype(np.float32),
        "b2": np.zeros(10, np.float32),
    }
    params = {k: hvd.broadcast(v, root_rank=0, name=f"init.{k}") for k, v in params.items()}

    steps = len(x_train) // BATCH
    for epoch in range(EPOCHS):
        order = np.random.default_rng(epoch * size + rank).permutation(len(x_train))
        losses = []
        for step in range(steps):
            batch = order[step * BATCH : (step + 1) * BATCH]
            loss, grads = _gradients(params, x_train[batch], y_train[batch])
            handles = {k: hvd.allreduce_async(g, name=f"grad.{k}", op=hvd.Average) for k, g in grads.items()}
            for k, handle in handles.items():
                params[k] -= LEARNING_RATE * hvd.synchronize(handle)
            losses.append(loss)
        mean_loss = float(hvd.allreduce(np.float32(np.mean(losses)), name="epoch.loss"))
        _, probs = _forward(params, x_test)
        accuracy = float((probs.argmax(1) == y_test).mean())
        if rank == 0:
            print(f"epoch {epoch + 1:2d}/{EPOCHS}  loss {mean_loss:.4f}  test accuracy {accuracy:.4f}", flush=True)

    # Every rank must hold the same weights: compare against rank 0's.
    for k, v in params.items():
        reference = hvd.broadcast(v, root_rank=0, name=f"check.{k}")
        assert np.array_equal(reference, v), f"rank {rank}: weights {k} differ from rank 0"
    if rank == 0:
        print(f"final test accuracy {accuracy:.4f} ({size} ranks, identical weights on every rank)", flush=True)
    hvd.shutdown()
    return {"accuracy": accuracy}


if __name__ == "__main__":
    if "HOROVOD_SIZE" in os.environ:  # started by a launcher: this process is one rank
        train()
    else:
        from horovod.common.testing import run_cluster

        run_cluster(train, 2, timeout=600)
