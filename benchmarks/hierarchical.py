"""Allreduce times on a job across hosts, flat or hierarchical (whichever the launch chose with
HOROVOD_HIERARCHICAL_ALLREDUCE): run by hosts_table.py on two namespace hosts of two ranks each.
Rank 0 writes each size's median time per allreduce, and how many allreduces went host by host."""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

import horovod.torch as hvd
from horovod.common.testing.probes import engine_stats

MiB = 1 << 20
SIZES = [64 * 1024, MiB, 16 * MiB, 64 * MiB]
REPEATS = 7


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    results = []
    for size in SIZES:
        tensor = torch.ones(size // 4)
        calls = 20 if size <= 64 * 1024 else 3 if size <= 16 * MiB else 1
        for _ in range(2):  # warm-up: connections, buffers, the response cache
            hvd.allreduce_(tensor, name=f"h.{size}")
        samples = []
        for _ in range(REPEATS):
            hvd.barrier()
            start = time.perf_counter()
            for _ in range(calls):
                hvd.allreduce_(tensor, name=f"h.{size}")
            samples.append((time.perf_counter() - start) / calls)
        results.append({"bytes": size, "median": statistics.median(samples)})
    if hvd.rank() == 0:
        with open(args.out, "w") as f:
            json.dump({"results": results, "hierarchical_allreduces": engine_stats()["hierarchical_allreduces"]}, f)
    hvd.shutdown()


if __name__ == "__main__":
    main()
