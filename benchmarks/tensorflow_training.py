"""Synthetic Keras training throughput: horovod.tensorflow against tf.distribute.MultiWorkerMirroredStrategy.

The same Keras models (a small CNN and an MLP on 32x32x3 synthetic images, 10 classes), the same
per-worker batch (32), plain SGD, one intra-op thread per process, two processes on this machine:

    # hvd: DistributedGradientTape inside a tf.function step, under the launcher
    horovodrun -np 2 python benchmarks/tensorflow_training.py --framework hvd --out hvd.json
    # MWMS: this file's launcher starts the workers, each with its TF_CONFIG (127.0.0.1 ports)
    python benchmarks/tensorflow_training.py --framework mwms --np 2 --out mwms.json
    # across two network-namespace hosts (root): hvd through hosts_table.run_hosts, MWMS with
    python benchmarks/tensorflow_training.py --framework mwms-hosts --out mwms.json

The two cannot share processes (MWMS owns TF's collective runtime and its cluster), so they are
separate launches; run_all.py alternates them. To make launches comparable on this noisy machine,
each launch also runs `local`, the same step with no communication at all, in alternating blocks
with its framework in the same processes: the most any data-parallel framework can reach here,
and the yardstick of each framework's launch. Rank 0 (the chief) writes images/s, per rank and in
total, each rank's figure being the median of its timed windows.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tensorflow as tf

# TensorFlow is imported inside the functions that use it: the MWMS launcher (this file's own
# process) only starts workers and reads their results, and needs none of its seconds of import.

MODELS = ("cnn", "mlp")
# Beside them on request (--models): Keras' MobileNetV2 (2.3M parameters), the model of Horovod's
# tensorflow2_synthetic_benchmark.py, on 32x32 inputs so that a step takes a fraction of a second here.
MORE_MODELS = ("mobilenetv2",)
IMAGE_SHAPE = (32, 32, 3)
CLASSES = 10
MWMS_TIMEOUT_S = 900  # the whole MWMS launch: a hung collective fails the run instead of stalling it
MWMS_HOSTS_PORT = 29600  # each worker's port on its own namespace host: nothing else listens there


def configure_threads() -> None:
    """One intra-op thread per process (two share this machine's cores); before TF runs any op."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)


def build_model(name: str) -> tf.keras.Model:
    """The Keras twins of training.py's torch models (same layers and sizes), seeded alike on every rank."""
    import tensorflow as tf

    layers = tf.keras.layers
    tf.keras.utils.set_random_seed(0)
    if name == "mobilenetv2":
        return tf.keras.applications.MobileNetV2(input_shape=IMAGE_SHAPE, weights=None, classes=CLASSES)
    if name == "cnn":
        body = [
            layers.Conv2D(32, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(64, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Flatten(),
            layers.Dense(256, activation="relu"),
            layers.Dense(CLASSES),
        ]
    else:
        body = [
            layers.Flatten(),
            layers.Dense(1024, activation="relu"),
            layers.Dense(1024, activation="relu"),
            layers.Dense(CLASSES),
        ]
    return tf.keras.Sequential([tf.keras.Input(IMAGE_SHAPE), *body])


def synthetic_batch(batch: int, rank: int) -> tuple[tf.Tensor, tf.Tensor]:
    """A fixed batch per rank: the input pipeline is not what is measured."""
    import tensorflow as tf

    images = tf.random.stateless_normal([batch, *IMAGE_SHAPE], seed=[0, rank])
    labels = tf.random.stateless_uniform([batch], seed=[1, rank], maxval=CLASSES, dtype=tf.int32)
    return images, labels


def make_step(model_name: str, batch: int, rank: int, reduce_gradients: Callable[[Any], Any] | None) -> Callable:
    """A tf.function training step outside any strategy; `reduce_gradients` wraps the tape (hvd) or is None (local)."""
    import tensorflow as tf

    model = build_model(model_name)
    optimizer = tf.keras.optimizers.SGD(0.01)
    optimizer.build(model.trainable_variables)
    images, labels = synthetic_batch(batch, rank)
    if reduce_gradients is not None:
        import horovod.tensorflow as hvd

        # Keras 3's variables wrap a tf.Variable (`.value`); hvd.broadcast_variables wants the latter
        # (given the Keras ones it fails: they have no read_value()).
        hvd.broadcast_variables([v.value for v in model.variables], root_rank=0)

    @tf.function
    def step() -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        if reduce_gradients is not None:
            tape = reduce_gradients(tape)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        return loss

    return step


def make_mwms_step(strategy: Any, model_name: str, batch: int, rank: int, workers: int) -> Callable:
    """The same step under MultiWorkerMirroredStrategy: variables made in its scope, the loss averaged over
    the global batch; Keras' optimizer sums the gradients over the workers (all_reduce in the replica context)."""
    import tensorflow as tf

    with strategy.scope():
        model = build_model(model_name)
        optimizer = tf.keras.optimizers.SGD(0.01)
        optimizer.build(model.trainable_variables)
    images, labels = synthetic_batch(batch, rank)

    def replica_step() -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=batch * workers)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def step() -> Any:
        return strategy.run(replica_step)

    return step


def images_per_second(
    steps: dict[str, Callable], meet: Callable[[], None], batch: int, warmup: int, windows: int, steps_per_window: int
) -> dict[str, float]:
    """This rank's median images/s of each step, timed in alternating windows (framework, local, framework,
    ...): both see the same minutes of this machine. Ranks meet before each window so they start it together."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    rates: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(windows):
        for name, step in steps.items():
            meet()
            start = time.perf_counter()
            for _ in range(steps_per_window):
                step()
            rates[name].append(batch * steps_per_window / (time.perf_counter() - start))
    return {name: statistics.median(r) for name, r in rates.items()}


def thread_settings() -> dict[str, int]:
    import tensorflow as tf

    return {
        "intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
    }


def run_hvd(args: argparse.Namespace) -> None:
    """A rank under horovodrun: DistributedGradientTape's step beside the local one, per model."""
    import tensorflow as tf

    import horovod.tensorflow as hvd

    configure_threads()
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    measured: dict[str, float] = {}
    for model_name in args.models.split(","):
        steps = {
            "hvd": make_step(model_name, args.batch_size, rank, hvd.DistributedGradientTape),
            "local": make_step(model_name, args.batch_size, rank, None),
        }
        if args.fp16:  # --fp16-allreduce in Horovod's synthetic benchmarks
            steps["hvd-fp16"] = make_step(
                model_name,
                args.batch_size,
                rank,
                lambda tape: hvd.DistributedGradientTape(tape, compression=hvd.Compression.fp16),
            )
        rates = images_per_second(steps, hvd.barrier, args.batch_size, args.warmup, args.windows, args.steps_per_window)
        measured.update({f"{model_name}.{name}": rate for name, rate in rates.items()})
    keys = sorted(measured)
    gathered = hvd.allgather(tf.constant([[measured[k] for k in keys]], tf.float64), name="rates").numpy()
    if rank == 0:
        results = {
            k: {"per_rank": gathered[:, i].tolist(), "total": float(gathered[:, i].sum())} for i, k in enumerate(keys)
        }
        write_results(args.out, "hvd", size, results)
    hvd.shutdown()


def run_mwms_worker(args: argparse.Namespace) -> None:
    """One MWMS worker (TF_CONFIG set by launch_mwms): MWMS's step beside the local one, per model."""
    import tensorflow as tf

    configure_threads()  # before the strategy: it starts TF's runtime
    config = json.loads(os.environ["TF_CONFIG"])
    rank, workers = int(config["task"]["index"]), len(config["cluster"]["worker"])
    ring = tf.distribute.experimental.CommunicationImplementation.RING
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(implementation=ring)
    )

    @tf.function
    def meet() -> None:
        strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, 1.0))

    measured: dict[str, float] = {}
    for model_name in args.models.split(","):
        steps = {
            "mwms": make_mwms_step(strategy, model_name, args.batch_size, rank, workers),
            "local": make_step(model_name, args.batch_size, rank, None),
        }
        rates = images_per_second(steps, meet, args.batch_size, args.warmup, args.windows, args.steps_per_window)
        measured.update({f"{model_name}.{name}": rate for name, rate in rates.items()})
    with open(f"{args.out}.worker{rank}", "w") as f:
        json.dump({"rank": rank, "rates": measured, "threads": thread_settings()}, f)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tf_config(workers: list[str], index: int) -> str:
    return json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})


def wait_all(procs: list[subprocess.Popen], timeout: float) -> None:
    """Waits for every worker; the first failure, or the deadline, stops the others (a worker whose
    peer died would wait in its collective for ever)."""
    deadline = time.monotonic() + timeout
    try:
        while any(p.poll() is None for p in procs):
            failed = [p for p in procs if p.returncode not in (None, 0)]
            if failed:
                raise RuntimeError(f"MWMS worker {procs.index(failed[0])} exited with {failed[0].returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"MWMS workers still running after {timeout:.0f} s")
            time.sleep(0.2)
        failed = [p for p in procs if p.returncode != 0]
        if failed:
            raise RuntimeError(f"MWMS worker {procs.index(failed[0])} exited with {failed[0].returncode}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def launch_mwms(args: argparse.Namespace) -> None:
    """Starts `args.np` MWMS workers on localhost (this file, each with its TF_CONFIG), then merges
    their results into `args.out` as run_hvd's rank 0 writes them."""
    ports = [free_port() for _ in range(args.np)]
    run_mwms_workers(args, [f"127.0.0.1:{p}" for p in ports], lambda index, command: command)


def launch_mwms_on_hosts(args: argparse.Namespace) -> None:
    """One MWMS worker on each of two network-namespace hosts (hosts_table.py's cluster; root), every
    byte between them over TCP, as horovodrun's ranks across the same hosts."""
    from horovod.runner.testing.netns_cluster import NetnsCluster
    from hosts_table import PREFIX, SUBNET

    with NetnsCluster(hosts=2, prefix=PREFIX, subnet=SUBNET) as cluster:
        workers = [f"{cluster.address(host)}:{MWMS_HOSTS_PORT}" for host in cluster.hosts]
        run_mwms_workers(args, workers, lambda index, command: cluster.command(cluster.hosts[index], command))


def run_mwms_workers(
    args: argparse.Namespace, workers: list[str], where: Callable[[int, list[str]], list[str]]
) -> None:
    """Runs this file's MWMS worker `index` at `workers[index]` (`where` wraps its command to run
    there), then merges their results into `args.out`."""
    with tempfile.TemporaryDirectory() as tmp:
        worker_out = str(Path(tmp) / "mwms.json")
        forwarded = [
            *("--batch-size", str(args.batch_size), "--warmup", str(args.warmup), "--windows", str(args.windows)),
            *("--steps-per-window", str(args.steps_per_window), "--models", args.models),
        ]
        procs = []
        for index in range(len(workers)):
            env = {**os.environ, "TF_CONFIG": tf_config(workers, index), "OMP_NUM_THREADS": "1"}
            command = [sys.executable, __file__, "--framework", "mwms-worker", "--out", worker_out, *forwarded]
            procs.append(subprocess.Popen(where(index, command), env=env))
        wait_all(procs, args.timeout)
        per_worker = [json.loads(Path(f"{worker_out}.worker{i}").read_text()) for i in range(len(workers))]
    keys = sorted(per_worker[0]["rates"])
    results = {}
    for key in keys:
        per_rank = [w["rates"][key] for w in per_worker]
        results[key] = {"per_rank": per_rank, "total": sum(per_rank)}
    write_results(args.out, "mwms", len(workers), results, per_worker[0]["threads"])


def write_results(
    out: str, framework: str, ranks: int, results: dict[str, Any], threads: dict[str, int] | None = None
) -> None:
    data = {
        "framework": framework,
        "ranks": ranks,
        "results": results,
        "threads": threads or thread_settings(),
        "load": os.getloadavg()[:2],
    }
    Path(out).write_text(json.dumps(data))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--framework", choices=["hvd", "mwms", "mwms-hosts", "mwms-worker"], required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--np", type=int, default=2, help="MWMS workers to start (hvd: horovodrun's -np)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--windows", type=int, default=7, help="timed windows per framework and model")
    parser.add_argument("--steps-per-window", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=MWMS_TIMEOUT_S, help="MWMS: hard limit for the workers")
    parser.add_argument("--models", default=",".join(MODELS), help=f"which of {', '.join(MODELS + MORE_MODELS)}")
    parser.add_argument("--fp16", action="store_true", help="hvd: also the step with fp16-compressed gradients")
    args = parser.parse_args()
    launch = {
        "hvd": run_hvd,
        "mwms": launch_mwms,
        "mwms-hosts": launch_mwms_on_hosts,
        "mwms-worker": run_mwms_worker,
    }
    launch[args.framework](args)


if __name__ == "__main__":
    main()
