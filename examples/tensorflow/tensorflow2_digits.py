"""Data-parallel training of a small MLP on scikit-learn's digits with horovod.tensorflow (TF2).

A normal Horovod TensorFlow 2 script: each rank trains on its shard of the data in a custom
``@tf.function`` training step, ``hvd.DistributedGradientTape`` averages the gradients, and after
the first step rank 0's weights and optimizer state are broadcast to every rank.

    horovodrun -np 2 python examples/tensorflow/tensorflow2_digits.py

Also `mpirun -np 2 python examples/tensorflow/tensorflow2_digits.py` with hvd-backend-mpi installed.
At the end every rank compares its weights with the others' and the script fails if they differ.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
import time
from collections.abc import Callable

# Quiet TensorFlow's C++ start-up messages (set before TensorFlow is imported).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import horovod.tensorflow as hvd


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="horovod.tensorflow: MLP on scikit-learn's digits")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05, help="per rank; scaled by the number of ranks")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--seed", type=int, default=42)
    return parser.parse_args(argv)


def configure_tensorflow(seed: int) -> None:
    """Few threads (ranks share a small machine) and seeds (runs repeat)."""
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    # Each rank seeds differently so that its initial weights differ: the broadcast must fix that.
    random.seed(seed + hvd.rank())
    np.random.seed(seed + hvd.rank())
    tf.random.set_seed(seed + hvd.rank())


def load_data(seed: int) -> tuple[np.ndarray, ...]:
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    return tuple(train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y))


def shard_batches(x: np.ndarray, y: np.ndarray, epoch: int, seed: int, batch_size: int) -> list[tuple]:
    """This rank's batches for one epoch: one shuffle shared by all ranks (same seed), padded so
    every rank has the same number of batches (each step is a collective: counts must match)."""
    order = np.random.default_rng(seed + epoch).permutation(len(x))
    per_rank = -(-len(order) // hvd.size())
    order = np.concatenate([order, order[: per_rank * hvd.size() - len(order)]])
    shard = order[hvd.rank() :: hvd.size()]
    return [(x[shard[i : i + batch_size]], y[shard[i : i + batch_size]]) for i in range(0, len(shard), batch_size)]


def build_model(hidden: int) -> tf.keras.Model:
    return tf.keras.Sequential(
        [
            tf.keras.Input(shape=(64,)),
            tf.keras.layers.Dense(hidden, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )


def make_train_step(
    model: tf.keras.Model, opt: tf.keras.optimizers.Optimizer
) -> Callable[[tf.Tensor, tf.Tensor, bool], tf.Tensor]:
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(images: tf.Tensor, labels: tf.Tensor, first_batch: bool) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        # Horovod: the tape's gradients are averaged over the ranks.
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        # Horovod: broadcast rank 0's initial state after the first step, once the optimizer has
        # created its variables. (Keras 3: `opt.variables` is a property, not a method.)
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(opt.variables, root_rank=0)
        return loss

    return train_step


def evaluate(model: tf.keras.Model, x: np.ndarray, y: np.ndarray) -> float:
    """Test accuracy over the whole test set, each rank scoring its shard."""
    shard = slice(hvd.rank(), None, hvd.size())
    predicted = tf.argmax(model(x[shard], training=False), axis=1).numpy()
    counts = tf.constant([float((predicted == y[shard]).sum()), float(len(y[shard]))], dtype=tf.float64)
    correct, total = hvd.allreduce(counts, op=hvd.Sum, name="eval.counts").numpy()
    return float(correct / total)


def weights_digest(model: tf.keras.Model) -> str:
    """A hash of the exact bytes of every weight: equal digests mean bit-identical weights."""
    digest = hashlib.sha256()
    for variable in model.variables:
        digest.update(variable.numpy().tobytes())
    return digest.hexdigest()


def main(args: argparse.Namespace) -> int:
    hvd.init()
    configure_tensorflow(args.seed)
    rank, size = hvd.rank(), hvd.size()
    x_train, x_test, y_train, y_test = load_data(args.seed)

    model = build_model(args.hidden)
    # Horovod: scale the learning rate by the number of ranks (the global batch grows with them).
    opt = tf.keras.optimizers.SGD(learning_rate=args.lr * size, momentum=args.momentum)
    train_step = make_train_step(model, opt)

    start = time.perf_counter()
    accuracy = 0.0
    for epoch in range(args.epochs):
        losses = [
            float(train_step(tf.constant(images), tf.constant(labels), epoch == 0 and i == 0))
            for i, (images, labels) in enumerate(shard_batches(x_train, y_train, epoch, args.seed, args.batch_size))
        ]
        epoch_loss = float(hvd.allreduce(tf.constant(np.mean(losses)), name="epoch.loss"))
        accuracy = evaluate(model, x_test, y_test)
        if rank == 0:
            print(
                f"epoch {epoch + 1:2d}/{args.epochs}  loss {epoch_loss:.4f}  test accuracy {accuracy:.4f}", flush=True
            )
    elapsed = time.perf_counter() - start

    # Every rank must hold bit-identical weights: compare digests of them across ranks.
    digests = hvd.allgather_object(weights_digest(model), name="final.digest")
    identical = len(set(digests)) == 1
    if rank == 0:
        print(f"weight digests per rank: {[d[:16] for d in digests]}", flush=True)
        verdict = "weights identical" if identical else "WEIGHTS DIFFER"
        print(
            f"final test accuracy {accuracy:.4f} ({size} ranks, {verdict}; {args.epochs} epochs in {elapsed:.1f} s)",
            flush=True,
        )
    if not identical:
        print(f"rank {rank}: weights differ between ranks: {digests}", file=sys.stderr, flush=True)
    hvd.shutdown()
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main(parse_args()))
