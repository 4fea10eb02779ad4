"""Data-parallel ``model.fit`` on scikit-learn's digits with horovod.keras (Keras 3).

A normal Horovod Keras script: the optimizer is wrapped in ``hvd.DistributedOptimizer`` (gradients
averaged over the ranks inside the compiled train step), the learning rate is scaled by the number
of ranks and warmed up to it, rank 0's initial weights are broadcast, epoch metrics are averaged
over the ranks, only rank 0 prints and saves a checkpoint, and ``hvd.load_model`` restores it.

    horovodrun -np 2 python examples/keras/keras_digits.py
    KERAS_BACKEND=torch horovodrun -np 2 python examples/keras/keras_digits.py   # with hvd-torch

At the end every rank compares its weights with the others' and the script fails if they differ.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is imported

import keras
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import horovod.keras as hvd


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="horovod.keras: model.fit on scikit-learn's digits")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.02, help="per rank; scaled by the number of ranks")
    parser.add_argument("--warmup-epochs", type=int, default=2)
    parser.add_argument("--use-adasum", action="store_true", help="combine the ranks' gradients by Adasum")
    parser.add_argument("--checkpoint", default="", help="where rank 0 saves the model (default: a temporary file)")
    return parser.parse_args(argv)


def one_thread_per_rank() -> None:
    """Ranks share a small machine: one intra-op thread each, whichever backend Keras runs on."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
    elif keras.backend.backend() == "torch":
        import torch

        torch.set_num_threads(1)


def load_shard() -> tuple[np.ndarray, ...]:
    """This rank's share of the training set, and the whole test set."""
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
    # Every rank gets the same number of rows: each step is a collective, so step counts must match.
    per_rank = len(x_train) // hvd.size()
    mine = slice(hvd.rank() * per_rank, (hvd.rank() + 1) * per_rank)
    return x_train[mine], y_train[mine], x_test, y_test


def build_model() -> keras.Model:
    keras.utils.set_random_seed(1000 + hvd.rank())  # different on each rank: the broadcast must fix it
    return keras.Sequential(
        [keras.Input((64,)), keras.layers.Dense(128, activation="relu"), keras.layers.Dense(10, activation="softmax")]
    )


def weights_digest(model: keras.Model) -> str:
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.asarray(weight).tobytes())
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    hvd.init()
    one_thread_per_rank()
    x_train, y_train, x_test, y_test = load_shard()

    model = build_model()
    # Horovod: scale the learning rate by the number of ranks; Adasum adapts the combined step
    # itself (from the sum of the ranks' gradients, orthogonal, to their mean, parallel): unscaled.
    lr = args.lr if args.use_adasum else args.lr * hvd.size()
    opt = hvd.DistributedOptimizer(
        keras.optimizers.SGD(lr, momentum=0.9), op=hvd.Adasum if args.use_adasum else hvd.Average
    )
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),
        hvd.callbacks.LearningRateWarmupCallback(
            lr, warmup_epochs=args.warmup_epochs, verbose=1 if hvd.rank() == 0 else 0
        ),
    ]
    verbose = 2 if hvd.rank() == 0 else 0  # Horovod: only rank 0 prints
    model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs, callbacks=callbacks, verbose=verbose)

    checkpoint = args.checkpoint or os.path.join(tempfile.gettempdir(), f"hvd-keras-digits-{os.getppid()}.keras")
    checkpoint = hvd.broadcast_object(checkpoint, root_rank=0, name="checkpoint.path")
    if hvd.rank() == 0:
        model.save(checkpoint)
    hvd.barrier()
    restored = hvd.load_model(checkpoint)  # every rank: the model and its optimizer, distributed again
    accuracy = float(restored.evaluate(x_test, y_test, verbose=0)[1])

    digests = hvd.allgather_object(weights_digest(restored), name="digests")
    if hvd.rank() == 0:
        print(f"test accuracy {accuracy:.4f} (restored from {checkpoint}, Keras on {keras.backend.backend()})")
        print(f"weights identical on all {hvd.size()} ranks: {len(set(digests)) == 1}")
    hvd.barrier()
    if hvd.rank() == 0 and not args.checkpoint:
        os.remove(checkpoint)
    return 0 if len(set(digests)) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
