"""Collectives across hosts: hvd (horovod.torch) beside torch.distributed (gloo), one rank per host.

Run by hosts_table.py under horovodrun inside a cluster of network namespaces (one rank on each of
two hosts), so every byte crosses a veth pair and a bridge over TCP, as between real machines:
hvd's Gloo backend cannot use shared memory between ranks on different hosts, and torch.distributed
connects to rank 0's host address (HVD_BENCH_TORCH_ADDR) on the cluster's interface
(GLOO_SOCKET_IFNAME). Within each size, repetitions alternate hvd and torch.distributed, so each
repetition gives a pair timed under the same machine state and a ratio of its own. Every repetition
starts after a barrier (untimed) and counts on the rank that finished last. Rank 0 writes the
results as JSON.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

import torch
import torch.distributed as dist

import horovod.torch as hvd
from collectives import busbw_factor, hvd_op, init_torch_gloo, inner_calls, torch_op
from stats import OUT_OF_PLACE, load_average, measure_alternating, summary

KiB = 1024
# 4 KiB, 16 KiB, ... 256 MiB: from latency-bound to bandwidth-bound on a TCP link.
SIZES = [4 * KiB * 4**k for k in range(9)]
OPS = ["allreduce", OUT_OF_PLACE, "allgather", "broadcast", "alltoall", "reducescatter"]
WARMUP = 3  # calls of each side before a size's repetitions
MiB = 1024 * KiB


def repetitions(size: int, base: int) -> int:
    """Repetitions of a size: `base` from 64 MiB, more below, where a repetition costs milliseconds.

    A cell's figure is the median of its repetitions' ratios, and on this shared machine one
    repetition's ratio ranges over 10x or more at small sizes (the other rank, or another process,
    takes the core for a while). With 15 repetitions such a cell's median moved by 0.3 between runs
    minutes apart; five times as many cost seconds there, and the median then says what the two
    libraries do rather than which repetitions the machine disturbed.
    """
    return base * (5 if size <= 4 * MiB else 2 if size <= 16 * MiB else 1)


def torch_side(op: str, tensor: torch.Tensor, n: int) -> tuple[Callable[[], None], str]:
    """torch.distributed's counterpart of `op`, and what it is when that is not plain (shown in the table).

    collectives.py substitutes an allreduce for the reduce-scatter that torch's gloo lacked; this
    torch's gloo has a real one (reduce_scatter_single, once reduce_scatter_tensor), the fair
    comparison.
    """
    reduce_scatter = getattr(dist, "reduce_scatter_single", None) or getattr(dist, "reduce_scatter_tensor", None)
    if op == "reducescatter" and reduce_scatter is not None:
        out = torch.empty(tensor.numel() // n, dtype=tensor.dtype)
        return lambda: reduce_scatter(out, tensor), reduce_scatter.__name__
    return torch_op(op, tensor, n), "all_reduce" if op == "reducescatter" else ""


def slowest_rank(samples: list[float]) -> dict:
    """Each repetition's time on the rank that took longest: the op's time is when every rank has
    its result. A broadcast's root alone would undercount: torch.distributed's root returns once its
    data is handed to the kernel, and its receivers are still reading when the next repetition
    (the other library's) starts, which would then bill that reading to the wrong side."""
    everyone: list[list[float] | None] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, samples)
    return summary([max(column) for column in zip(*everyone, strict=True)])


def sweep(op: str, sizes: list[int], n: int, repeats: int) -> list[dict]:
    """One result per size: hvd and torch.distributed timed in alternation, with each repetition's samples
    (kept so that the table can give the median of the per-repetition ratios)."""
    results = []
    for size in sizes:
        elements = size // 4
        elements -= elements % n if op in ("reducescatter", "alltoall") else 0
        t_hvd = torch.ones(elements, dtype=torch.float32)
        t_torch = torch.ones(elements, dtype=torch.float32)
        torch_fn, torch_note = torch_side(op, t_torch, n)
        inner = inner_calls(size)
        timed = measure_alternating(
            {"hvd": hvd_op(op, t_hvd, f"hosts.{op}.{size}"), "torch": torch_fn},
            inner={"hvd": inner, "torch": inner},
            warmup=WARMUP,
            repeats=repetitions(size, repeats),
            before_each=dist.barrier,
        )
        timed = {side: slowest_rank(s["samples"]) for side, s in timed.items()}
        results.append(
            {
                "bench": op,
                "bytes": elements * 4,
                "inner": inner,
                **timed,
                "torch_op": torch_note,
                "busbw_factor": busbw_factor(op, n),
                "load": load_average(),
            }
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--repeats", type=int, default=7, help="from 64 MiB; more below (repetitions())")
    parser.add_argument("--max-bytes", type=int, default=SIZES[-1])
    parser.add_argument("--min-bytes", type=int, default=SIZES[0], help="smallest size (for a quicker look)")
    parser.add_argument("--ops", nargs="+", choices=OPS, default=OPS)
    parser.add_argument("--sizes", type=int, nargs="+", help="these sizes in bytes instead of the sweep's")
    args = parser.parse_args()
    # One thread per rank, for both (OMP_NUM_THREADS=1 comes from the launch): ranks on this small
    # machine share its cores, and torch's intra-op pool would compete with the communication threads.
    torch.set_num_threads(1)
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    init_torch_gloo(rank, n)
    sizes = args.sizes or [s for s in SIZES if args.min_bytes <= s <= args.max_bytes]
    results = [r for op in args.ops for r in sweep(op, sizes, n, args.repeats)]
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump({"ranks": n, "hosts": hvd.cross_size(), "warmup": WARMUP, "results": results}, f)
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
