"""Training on scikit-learn's digits with the input pipeline on a compute job (Horovod's tf.data
service): the augmentation runs on the compute job's ranks, the training job only trains.

    # the compute job (its rank 0 writes compute.json; --dispatcher-side training: the training job
    # runs the dispatchers instead)
    horovodrun -np 2 python -m horovod.tensorflow.data.compute_worker /tmp/compute.json
    # the training job, on the same hosts or others
    horovodrun -np 2 python examples/tensorflow/tensorflow2_data_service.py /tmp/compute.json

The training ranks share one job of the dataset (``reuse_dataset``): each batch goes to one of
them. At the end rank 0 ends the compute job, and prints the test accuracy and whether every rank
holds the same weights. ``--local`` runs the same pipeline in the training job instead (no compute
job, no config), for comparison.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is imported

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import horovod.tensorflow as hvd
from horovod.tensorflow.data import TfDataServiceConfig, tf_data_service


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="horovod.tensorflow: digits, input pipeline on a compute job")
    parser.add_argument("config", nargs="?", help="the compute job's config file (its rank 0 writes it)")
    parser.add_argument("--local", action="store_true", help="run the input pipeline here instead")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--steps-per-epoch", type=int, default=25)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--augment-rounds", type=int, default=20, help="how CPU-heavy the augmentation is")
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args(argv)
    if not args.local and not args.config:
        parser.error("the compute job's config file is required (or --local)")
    return args


def augmented(x: np.ndarray, y: np.ndarray, batch_size: int, rounds: int) -> tf.data.Dataset:
    """Shuffled, endlessly repeated batches of noisy, shifted digits: CPU work per element."""

    def augment(image: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        picture = tf.reshape(image, (8, 8, 1))
        for _ in range(rounds):  # repeated small image operations: the CPU-heavy part
            picture = tf.image.random_brightness(picture, 0.02)
            picture = tf.clip_by_value(picture + tf.random.normal(tf.shape(picture), stddev=0.01), 0.0, 1.0)
        picture = tf.roll(picture, shift=tf.random.uniform((), -1, 2, dtype=tf.int32), axis=1)
        return tf.reshape(picture, (64,)), label

    data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=7).repeat()
    return data.map(augment).batch(batch_size, drop_remainder=True)


def main(args: argparse.Namespace) -> int:
    hvd.init()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    rank, size = hvd.rank(), hvd.size()
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(x, digits.target, test_size=0.2, random_state=42)
    pipeline = augmented(x_train, y_train, args.batch_size, args.augment_rounds)

    with contextlib.ExitStack() as stack:
        config = None
        if not args.local:
            config = TfDataServiceConfig.read(args.config, wait_for_file_creation=True, timeout=120)
            # Where the dispatcher runs (compute or training side), this gives its address once the
            # compute job's workers have joined it; the ranks share one job: each batch goes to one.
            address = stack.enter_context(tf_data_service(config, rank))
            pipeline = pipeline.apply(
                tf.data.experimental.service.distribute("distributed_epoch", address, job_name="digits")
            )
        batches = iter(pipeline)

        model = tf.keras.Sequential(
            [tf.keras.Input((64,)), tf.keras.layers.Dense(64, "relu"), tf.keras.layers.Dense(10)]
        )
        opt = tf.keras.optimizers.SGD(args.lr * size, momentum=0.9)
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        @tf.function
        def step(images: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, model(images, training=True))
            grads = hvd.DistributedGradientTape(tape).gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        start, images_seen = time.perf_counter(), 0
        for epoch in range(args.epochs):
            for i in range(args.steps_per_epoch):
                images, labels = next(batches)
                step(images, labels)
                if epoch == 0 and i == 0:  # rank 0's initial weights and optimizer state everywhere
                    hvd.broadcast_variables(model.variables + opt.variables, root_rank=0)
                images_seen += int(images.shape[0])
        elapsed = time.perf_counter() - start
        if config is not None:
            hvd.barrier()
            if rank == 0:  # the training is done: so is the compute job
                config.compute_client(verbose=0).shutdown()

    predicted = tf.argmax(model(x_test, training=False), axis=1).numpy()
    accuracy = float((predicted == y_test).mean())
    digest = hashlib.sha256(b"".join(v.numpy().tobytes() for v in model.variables)).hexdigest()
    identical = len(set(hvd.allgather_object(digest, name="digest"))) == 1
    rate = hvd.allreduce(tf.constant(images_seen / elapsed), op=hvd.Sum, name="rate").numpy()
    if rank == 0:
        where = "here" if args.local else "on the compute job"
        print(
            f"test accuracy {accuracy:.4f} ({size} ranks, input pipeline {where}, {rate:.0f} images/s, "
            f"weights identical: {identical})",
            flush=True,
        )
    hvd.shutdown()
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main(parse_args()))
