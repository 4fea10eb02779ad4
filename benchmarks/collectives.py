"""Collective benchmarks: hvd (horovod.torch) beside torch.distributed (gloo) in the same processes.

Run under the launcher, e.g. ``horovodrun -np 2 python benchmarks/collectives.py --out r.json``.
Every rank initialises both hvd and torch.distributed (gloo, on loopback) and the two are measured
alternately, so they see the same machine state. Rank 0 writes the results as JSON.

``--device cuda`` times the same collectives on CUDA tensors (``./dev gpu-check`` runs it with two
ranks on one GPU): hvd stages them through host memory and its CPU backend
(``HOROVOD_GPU_OPERATIONS=GLOO``), torch's gloo copies them too; every timed call ends with the
device synchronized, so both are timed to the result on the GPU. Only the collectives torch's gloo
runs on CUDA tensors are timed there (allreduce, broadcast, allgather).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import torch
import torch.distributed as dist

import horovod.torch as hvd
from stats import OUT_OF_PLACE, load_average, measure, measure_alternating

MiB = 1024 * 1024


def busbw_factor(op: str, n: int) -> float:
    """Bus bandwidth / algorithm bandwidth, as nccl-tests defines it."""
    return 2 * (n - 1) / n if op in ("allreduce", OUT_OF_PLACE) else (n - 1) / n if op != "broadcast" else 1.0


def hvd_op(op: str, tensor: torch.Tensor, name: str):
    if op == "allreduce":
        return lambda: hvd.allreduce_(tensor, name=name, op=hvd.Sum)
    if op == OUT_OF_PLACE:
        return lambda: hvd.allreduce(tensor, name=name, op=hvd.Sum)
    if op == "allgather":
        return lambda: hvd.allgather(tensor, name=name)
    if op == "broadcast":
        return lambda: hvd.broadcast_(tensor, root_rank=0, name=name)
    if op == "reducescatter":
        return lambda: hvd.reducescatter(tensor, name=name, op=hvd.Sum)
    if op == "alltoall":
        return lambda: hvd.alltoall(tensor, name=name)
    raise ValueError(op)


def torch_op(op: str, tensor: torch.Tensor, n: int):
    if op == "allreduce":
        return lambda: dist.all_reduce(tensor)
    if op == OUT_OF_PLACE:
        return lambda: dist.all_reduce(tensor.clone())
    if op == "allgather":
        outputs = [torch.empty_like(tensor) for _ in range(n)]
        return lambda: dist.all_gather(outputs, tensor)
    if op == "broadcast":
        return lambda: dist.broadcast(tensor, src=0)
    if op == "reducescatter":
        # torch's gloo backend has no reduce_scatter: the usual substitute is allreduce + slice.
        return lambda: dist.all_reduce(tensor)
    if op == "alltoall":
        out = torch.empty_like(tensor)
        return lambda: dist.all_to_all_single(out, tensor)
    raise ValueError(op)


def allreduce_sizes(max_bytes: int) -> list[int]:
    """The allreduce sweep: 4 B, 16 B, ... up to ``max_bytes`` (256 MiB by default)."""
    return [4 * 4**k for k in range(14) if 4 * 4**k <= max_bytes]


def inner_calls(size: int) -> int:
    """Calls per timing: enough that a small op's timing is not just the clock's resolution."""
    return 20 if size <= 64 * 1024 else 3 if size <= 16 * MiB else 1


#: The collectives torch's gloo backend runs on CUDA tensors.
CUDA_OPS = ("allreduce", OUT_OF_PLACE, "allgather", "broadcast")


def synced(fn, device: torch.device):
    """``fn``, then, on a GPU, a wait for the device: a call is timed to its result being there."""
    if device.type != "cuda":
        return fn

    def call() -> None:
        fn()
        torch.cuda.synchronize(device)

    return call


def sweep(results: list, op: str, sizes: list[int], n: int, repeats: int, device: torch.device) -> None:
    for size in sizes:
        elements = max(1, size // 4)
        elements -= elements % n if op in ("reducescatter", "alltoall") and elements >= n else 0
        t_hvd = torch.ones(elements, dtype=torch.float32, device=device)
        t_torch = torch.ones(elements, dtype=torch.float32, device=device)
        inner = inner_calls(size)
        hvd_stats = measure(synced(hvd_op(op, t_hvd, f"bench.{op}.{size}"), device), repeats=repeats, inner=inner)
        torch_stats = measure(synced(torch_op(op, t_torch, n), device), repeats=repeats, inner=inner)
        nbytes = elements * 4
        results.append(
            {
                "bench": op,
                "bytes": nbytes,
                "hvd": hvd_stats,
                "torch": torch_stats,
                "busbw_factor": busbw_factor(op, n),
                "device": device.type,
                "load": load_average(),
            }
        )


def fusion_round(results: list, n: int, repeats: int) -> None:
    """200 tensors of 1,024 float32, submitted asynchronously then synchronized."""
    tensors = [torch.ones(1024) for _ in range(200)]

    def hvd_round() -> None:
        handles = [hvd.allreduce_async_(t, name=f"fusion.{i}", op=hvd.Sum) for i, t in enumerate(tensors)]
        for h in handles:
            hvd.synchronize(h)

    def torch_one_by_one() -> None:
        for t in tensors:
            dist.all_reduce(t)

    def torch_async() -> None:
        for work in [dist.all_reduce(t, async_op=True) for t in tensors]:
            work.wait()

    flat = torch.ones(200 * 1024)

    def torch_floor() -> None:
        dist.all_reduce(flat)

    # hvd's round and the floor alternate, repetition by repetition: the bar is their ratio.
    paired = measure_alternating(
        {"hvd": hvd_round, "floor": torch_floor}, inner={"hvd": 1, "floor": 5}, repeats=repeats
    )
    results.append(
        {
            "bench": "fusion",
            "hvd": paired["hvd"],
            "torch_one_by_one": measure(torch_one_by_one, repeats=repeats),
            "torch_async": measure(torch_async, repeats=repeats),
            "floor": paired["floor"],
            "paired_ratio": statistics.median(
                h / f for h, f in zip(paired["hvd"]["samples"], paired["floor"]["samples"], strict=True)
            ),
            "load": load_average(),
        }
    )


def latency(results: list, repeats: int, device: torch.device) -> None:
    small_hvd, small_torch = torch.ones(1, device=device), torch.ones(1, device=device)
    hvd_call = synced(lambda: hvd.allreduce_(small_hvd, name="latency", op=hvd.Sum), device)
    results.append(
        {
            "bench": "latency",
            "bytes": 4,
            "hvd": measure(hvd_call, repeats=repeats, inner=200),
            "torch": measure(synced(lambda: dist.all_reduce(small_torch), device), repeats=repeats, inner=200),
            "device": device.type,
            "load": load_average(),
        }
    )


def init_torch_gloo(rank: int, n: int) -> None:
    """torch.distributed on gloo, beside hvd in the same processes (run_all.py picks the port).

    Over loopback on one host; across hosts (hosts.py) HVD_BENCH_TORCH_ADDR names rank 0's host,
    and GLOO_SOCKET_IFNAME the interface gloo's own connections take.
    """
    addr = os.environ.get("HVD_BENCH_TORCH_ADDR", "127.0.0.1")
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{addr}:{os.environ['HVD_BENCH_TORCH_PORT']}",
        rank=rank,
        world_size=n,
    )


def parse_sweep_args() -> argparse.Namespace:
    """The options of a sweep script (this one, mpi_allreduce.py): where rank 0 writes, how long it runs."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--max-bytes", type=int, default=256 * MiB)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the tensors live")
    return parser.parse_args()


def main() -> None:
    args = parse_sweep_args()
    torch.set_num_threads(1)
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    init_torch_gloo(rank, n)
    device = torch.device("cpu")
    if args.device == "cuda":  # ranks may share a GPU: local rank over the GPUs there are
        device = torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())
        torch.cuda.set_device(device)
    results: list = []
    sweep(results, "allreduce", allreduce_sizes(args.max_bytes), n, args.repeats, device)
    for op in (OUT_OF_PLACE, "allgather", "broadcast", "reducescatter", "alltoall"):
        if device.type == "cpu" or op in CUDA_OPS:
            sweep(results, op, [4 * 1024, MiB, 64 * MiB], n, args.repeats, device)
    latency(results, args.repeats, device)
    if device.type == "cpu":
        fusion_round(results, n, args.repeats)
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump({"ranks": n, "device": device.type, "results": results}, f)
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
