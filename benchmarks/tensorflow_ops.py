"""The TensorFlow adapter's cost: horovod.tensorflow beside horovod.torch on the same engine, same processes.

Run under the launcher: ``horovodrun -np 2 python benchmarks/tensorflow_ops.py --out r.json``.
Eagerly a TF tensor crosses to hvd-core's engine as a numpy array; inside a ``tf.function`` a
collective is one of hvd-tensorflow's asynchronous kernels (TensorFlow's C API), which submits to
the engine from native code. horovod.torch hands torch tensors to the same engine, so the ratio of
the two is what the TF adapter adds. Both run eagerly in one process, measured alternately
repetition by repetition (they see the same machine state), and each repetition's pair of timings
gives a ratio of its own: the tables show the median of those.

Two measurements:
- one allreduce (4 B .. 64 MiB float32): torch's out-of-place ``hvd.allreduce`` (TF tensors are
  immutable, so TF's allreduce always returns a new tensor), TF's eagerly, and TF's inside a
  ``tf.function`` that does one allreduce per call;
- a step of 200 tensors of 1,024 float32, the many-small-gradients case: one after another, as one
  group, and, inside a tf.function, as 200 separate allreduces (fused only if the function's ops
  are in flight together) and as one grouped_allreduce; beside torch's one by one, async then
  synchronize, and grouped.
Rank 0 writes the results as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable

import tensorflow as tf
import torch

import horovod.tensorflow as hvd
import horovod.torch as hvd_torch
from collectives import inner_calls
from stats import load_average, measure_alternating

MiB = 1024 * 1024
SIZES = (4, 4 * 1024, MiB, 64 * MiB)
STEP_TENSORS, STEP_ELEMENTS = 200, 1024


def configure_threads() -> None:
    """One intra-op thread per rank for both frameworks (two ranks share this machine's cores);
    TF's must be set before its first op."""
    tf.config.threading.set_intra_op_parallelism_threads(1)
    torch.set_num_threads(1)


def paired_ratio(measured: dict, numerator: str, denominator: str) -> float:
    """Median of each repetition's ratio: the two were timed back to back in every repetition."""
    pairs = zip(measured[numerator]["samples"], measured[denominator]["samples"], strict=True)
    return statistics.median(a / b for a, b in pairs)


def single_allreduce(size: int, repeats: int) -> dict:
    """One allreduce of `size` bytes: torch, TF eagerly, TF inside a tf.function (one op per call)."""
    elements = max(1, size // 4)
    tf_tensor, torch_tensor = tf.ones([elements], tf.float32), torch.ones(elements)
    # Named, on both sides: every call reuses its name, so the engine's response cache serves both alike.
    in_function = tf.function(lambda x: hvd.allreduce(x, op=hvd.Sum, name=f"tf.function.{size}"))
    fns: dict[str, Callable[[], object]] = {
        "torch": lambda: hvd_torch.allreduce(torch_tensor, op=hvd_torch.Sum, name=f"torch.{size}"),
        "tf": lambda: hvd.allreduce(tf_tensor, op=hvd.Sum, name=f"tf.{size}"),
        "tf_function": lambda: in_function(tf_tensor),
    }
    inner = inner_calls(size)
    measured = measure_alternating(fns, inner=dict.fromkeys(fns, inner), repeats=repeats)
    return {
        "bytes": elements * 4,
        **measured,
        "tf_vs_torch": paired_ratio(measured, "tf", "torch"),
        "tf_function_vs_torch": paired_ratio(measured, "tf_function", "torch"),
        "load": load_average(),
    }


def torch_step_fns(tensors: list[torch.Tensor]) -> dict[str, Callable[[], object]]:
    """horovod.torch's ways through a step's tensors: one by one, async then synchronize, grouped."""

    def one_by_one() -> None:
        for i, t in enumerate(tensors):
            hvd_torch.allreduce(t, op=hvd_torch.Sum, name=f"torch.step.{i}")

    def in_flight() -> None:
        handles = [
            hvd_torch.allreduce_async(t, op=hvd_torch.Sum, name=f"torch.async.{i}") for i, t in enumerate(tensors)
        ]
        for handle in handles:
            hvd_torch.synchronize(handle)

    return {
        "torch_one_by_one": one_by_one,
        "torch_async": in_flight,
        "torch_grouped": lambda: hvd_torch.grouped_allreduce(tensors, op=hvd_torch.Sum, name="torch.grouped"),
    }


def tf_step_fns(tensors: list[tf.Tensor]) -> dict[str, Callable[[], object]]:
    """horovod.tensorflow's: eagerly one by one and grouped; in a tf.function 200 allreduces and grouped."""

    def one_by_one() -> None:
        for i, t in enumerate(tensors):
            hvd.allreduce(t, op=hvd.Sum, name=f"tf.step.{i}")

    @tf.function
    def separate_ops(ts: list[tf.Tensor]) -> list[tf.Tensor]:
        # 200 submit ops, chained in program order (they are stateful), and 200 free wait ops.
        return [hvd.allreduce(t, op=hvd.Sum, name=f"tf.function.step.{i}") for i, t in enumerate(ts)]

    @tf.function
    def grouped_op(ts: list[tf.Tensor]) -> list[tf.Tensor]:
        return hvd.grouped_allreduce(ts, op=hvd.Sum, name="tf.function.grouped")

    return {
        "tf_one_by_one": one_by_one,
        "tf_grouped": lambda: hvd.grouped_allreduce(tensors, op=hvd.Sum, name="tf.grouped"),
        "tf_function_separate": lambda: separate_ops(tensors),
        "tf_function_grouped": lambda: grouped_op(tensors),
    }


# Each TF way of running the step, and the torch way it is compared with.
STEP_COUNTERPARTS = {
    "tf_one_by_one": "torch_one_by_one",
    "tf_grouped": "torch_grouped",
    "tf_function_separate": "torch_async",
    "tf_function_grouped": "torch_grouped",
}


def many_tensor_step(repeats: int) -> dict:
    """200 tensors of 1,024 float32 per step, every way of both frameworks, alternating."""
    fns = {
        **torch_step_fns([torch.ones(STEP_ELEMENTS) for _ in range(STEP_TENSORS)]),
        **tf_step_fns([tf.ones([STEP_ELEMENTS], tf.float32) for _ in range(STEP_TENSORS)]),
    }
    measured = measure_alternating(fns, inner=dict.fromkeys(fns, 1), repeats=repeats)
    ratios = {
        f"{tf_way}_vs_torch": paired_ratio(measured, tf_way, torch_way)
        for tf_way, torch_way in STEP_COUNTERPARTS.items()
    }
    return {"tensors": STEP_TENSORS, "elements": STEP_ELEMENTS, **measured, **ratios, "load": load_average()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--max-bytes", type=int, default=max(SIZES), help="largest single allreduce")
    args = parser.parse_args()
    configure_threads()
    hvd.init()  # one engine per process: horovod.torch's calls go to the same one
    results = {
        "ranks": hvd.size(),
        "single": [single_allreduce(size, args.repeats) for size in SIZES if size <= args.max_bytes],
        "step": many_tensor_step(args.repeats),
        "threads": {
            "tf_intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
            "tf_inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
            "torch": torch.get_num_threads(),
        },
    }
    if hvd.rank() == 0:
        with open(args.out, "w") as f:
            json.dump(results, f)
    hvd.shutdown()


if __name__ == "__main__":
    main()
