"""Horovod's TensorFlow 2 synthetic benchmark: training throughput on random data (images/sec).

Same structure and arguments as Horovod's examples/tensorflow2/tensorflow2_synthetic_benchmark.py,
written for TensorFlow 2.16+ (tf.keras is Keras 3, where ``opt.variables`` is a property). ``--model``
takes any ``tf.keras.applications`` name; ``--image-size`` (Horovod's fixed 224 by default) lets a
small run fit on CPUs:

    horovodrun -np 2 python examples/tensorflow/tensorflow2_synthetic_benchmark.py
    horovodrun -np 2 python examples/tensorflow/tensorflow2_synthetic_benchmark.py \\
        --model MobileNetV2 --image-size 32 --batch-size 8
"""

from __future__ import annotations

import argparse
import os
import timeit

# Quiet TensorFlow's C++ start-up messages (set before TensorFlow is imported).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from tensorflow.keras import applications

import horovod.tensorflow as hvd


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="TensorFlow Synthetic Benchmark", formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--fp16-allreduce", action="store_true", default=False, help="use fp16 compression during allreduce"
    )
    parser.add_argument(
        "--model", type=str, default="ResNet50", help="model to benchmark (a tf.keras.applications name)"
    )
    parser.add_argument("--batch-size", type=int, default=32, help="input batch size")
    parser.add_argument("--image-size", type=int, default=224, help="height and width of the synthetic images")
    parser.add_argument(
        "--num-warmup-batches",
        type=int,
        default=10,
        help="number of warm-up batches that don't count towards benchmark",
    )
    parser.add_argument(
        "--num-batches-per-iter", type=int, default=10, help="number of batches per benchmark iteration"
    )
    parser.add_argument("--num-iters", type=int, default=10, help="number of benchmark iterations")
    parser.add_argument("--eager", action="store_true", default=False, help="enables eager execution")
    parser.add_argument("--no-cuda", action="store_true", default=False, help="disables CUDA training")
    args = parser.parse_args(argv)
    if not callable(getattr(applications, args.model, None)):
        parser.error(f"--model: tf.keras.applications has no model {args.model!r}")
    return args


def pin_devices(args: argparse.Namespace) -> str:
    """Horovod: one GPU per process (the local rank's); returns the device kind used."""
    gpus = [] if args.no_cuda else tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.set_visible_devices(gpus[hvd.local_rank() % len(gpus)], "GPU")
        return "GPU"
    # CPU ranks share the machine's cores: keep each rank to few threads.
    tf.config.threading.set_intra_op_parallelism_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    tf.config.threading.set_inter_op_parallelism_threads(2)
    return "CPU"


def main(args: argparse.Namespace) -> None:
    # Horovod: initialize Horovod.
    hvd.init()
    device = pin_devices(args)
    if args.eager:
        tf.config.run_functions_eagerly(True)

    # Set up standard model.
    model = getattr(applications, args.model)(weights=None, input_shape=(args.image_size, args.image_size, 3))
    opt = tf.optimizers.SGD(0.01)

    data = tf.random.uniform([args.batch_size, args.image_size, args.image_size, 3])
    target = tf.random.uniform([args.batch_size, 1], minval=0, maxval=999, dtype=tf.int64)

    @tf.function
    def benchmark_step(first_batch: bool) -> None:
        # Horovod: (optional) compression algorithm.
        compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none

        with tf.GradientTape() as tape:
            probs = model(data, training=True)
            loss = tf.losses.sparse_categorical_crossentropy(target, probs)

        # Horovod: add Horovod Distributed GradientTape.
        tape = hvd.DistributedGradientTape(tape, compression=compression)

        gradients = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(gradients, model.trainable_variables, strict=True))

        # Horovod: broadcast initial variable states from rank 0 to all other processes, after the
        # first gradient step so that the optimizer's variables exist.
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(opt.variables, root_rank=0)

    def log(s: str) -> None:
        if hvd.rank() == 0:
            print(s, flush=True)

    log(f"Model: {args.model}")
    log(f"Batch size: {args.batch_size}")
    log(f"Number of {device}s: {hvd.size()}")

    with tf.device(device):
        # Warm-up
        log("Running warmup...")
        benchmark_step(first_batch=True)
        timeit.timeit(lambda: benchmark_step(first_batch=False), number=args.num_warmup_batches)

        # Benchmark
        log("Running benchmark...")
        img_secs = []
        for x in range(args.num_iters):
            time = timeit.timeit(lambda: benchmark_step(first_batch=False), number=args.num_batches_per_iter)
            img_sec = args.batch_size * args.num_batches_per_iter / time
            log(f"Iter #{x}: {img_sec:.1f} img/sec per {device}")
            img_secs.append(img_sec)

    # Results
    img_sec_mean = np.mean(img_secs)
    img_sec_conf = 1.96 * np.std(img_secs)
    log(f"Img/sec per {device}: {img_sec_mean:.1f} +-{img_sec_conf:.1f}")
    log(f"Total img/sec on {hvd.size()} {device}(s): {hvd.size() * img_sec_mean:.1f} +-{hvd.size() * img_sec_conf:.1f}")


if __name__ == "__main__":
    main(parse_args())
