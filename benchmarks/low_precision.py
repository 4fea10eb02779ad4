"""Allreduce of float16 and bfloat16 against float32 of the same element count: 16-bit data is half
the bytes, and should take well under float32's time once the data is large.

Run under the launcher, e.g. ``horovodrun -np 2 python benchmarks/low_precision.py --out r.json``
(``HOROVOD_GLOO_SHARED_MEMORY=0`` for TCP; ``HOROVOD_REDUCE_SIMD=portable`` for the reductions'
portable code; ``HVD_BENCH_TORCH_PORT`` a free port, which run_all.py and hosts_table.py choose).
For each size, one repetition of every dtype on hvd and on torch.distributed's gloo runs in turn, so
all six see the same machine state, and each repetition's 16-bit time over its float32 time is a
ratio of its own: the tables show the median of those paired ratios. Rank 0 writes the results as
JSON; ``python low_precision.py --table r.json [...]`` prints them as markdown.
"""

from __future__ import annotations

import argparse
import json
import os

from stats import paired_ratio, sweep_main

KiB, MiB = 1024, 1024 * 1024
DTYPE_NAMES = ("float32", "float16", "bfloat16")


def measure(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    import horovod.torch as hvd
    from collectives import init_torch_gloo, inner_calls
    from stats import load_average, measure_alternating

    dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    torch.set_num_threads(1)
    hvd.init()
    init_torch_gloo(hvd.rank(), hvd.size())
    sizes = [4 * KiB * 4**k for k in range(10) if 4 * KiB * 4**k <= args.max_bytes]
    results = []
    for size in sizes:
        elements = size // 4
        fns, inner = {}, {}
        for name, dtype in dtypes.items():
            # Zeros: the sums stay finite however often a tensor is reduced in place.
            ours, theirs = torch.zeros(elements, dtype=dtype), torch.zeros(elements, dtype=dtype)
            fns[f"hvd/{name}"] = lambda t=ours, tag=f"lp.{name}.{elements}": hvd.allreduce_(t, op=hvd.Sum, name=tag)
            fns[f"torch/{name}"] = lambda t=theirs: dist.all_reduce(t)
            inner[f"hvd/{name}"] = inner[f"torch/{name}"] = inner_calls(size)
        timed = measure_alternating(fns, inner=inner, repeats=args.repeats, before_each=hvd.barrier)
        row = {"elements": elements, "load": load_average()}
        for side in ("hvd", "torch"):
            row[side] = {name: timed[f"{side}/{name}"] for name in dtypes}
            reference = timed[f"{side}/float32"]["samples"]
            row[f"{side}_ratio"] = {
                name: paired_ratio(timed[f"{side}/{name}"]["samples"], reference) for name in dtypes
            }
        results.append(row)
    if hvd.rank() == 0:
        setting = {k: os.environ.get(k, "") for k in ("HOROVOD_GLOO_SHARED_MEMORY", "HOROVOD_REDUCE_SIMD")}
        with open(args.out, "w") as f:
            json.dump({"ranks": hvd.size(), "env": setting, "repeats": args.repeats, "results": results}, f)
    dist.destroy_process_group()
    hvd.shutdown()


def table(data: dict, title: str) -> list[str]:
    """One markdown table: hvd's median times, its paired 16-bit/float32 ratios, and torch's float16 over hvd's."""
    from stats import fmt_time, human_bytes

    header = (
        "| float32 bytes | float32 | float16 | bfloat16 | float16 / float32 | bfloat16 / float32 "
        "| torch gloo float16 / hvd float16 |"
    )
    load = data["results"][-1]["load"]
    lines = [f"{title} ({data['ranks']} ranks, {data['repeats']} repetitions; load {load})", "", header]
    lines.append("|---|---|---|---|---|---|---|")
    for r in data["results"]:
        hvd, ratio = r["hvd"], r["hvd_ratio"]
        lines.append(
            f"| {human_bytes(r['elements'] * 4)} | "
            + " | ".join(fmt_time(hvd[name]["median"]) for name in DTYPE_NAMES)
            + f" | {ratio['float16']:.2f} | {ratio['bfloat16']:.2f} | "
            f"{r['torch']['float16']['median'] / hvd['float16']['median']:.1f} |"
        )
    return lines


def main() -> None:
    sweep_main(measure, table, max_bytes=64 * MiB)


if __name__ == "__main__":
    main()
