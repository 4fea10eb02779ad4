"""Adasum's cost: allreduce(op=hvd.Adasum) against op=hvd.Sum of the same float32 tensor, 4 KiB to
64 MiB, beside torch.distributed's sum on gloo (it has no Adasum) in the same processes.

Run under the launcher, e.g. ``horovodrun -np 2 python benchmarks/adasum.py --out r.json``
(``HOROVOD_GLOO_SHARED_MEMORY=0`` for TCP; ``horovodrun --mpi`` for hvd-backend-mpi;
``HVD_BENCH_TORCH_PORT`` a free port). For each size one repetition of each runs in turn, so all
three see the same machine state; each repetition's Adasum time over its Sum time is a ratio of
its own, and the table shows their median. Rank 0 writes JSON; ``python adasum.py --table r.json``
prints it as markdown.
"""

from __future__ import annotations

import argparse
import json
import os

from stats import paired_ratio, sweep_main

KiB, MiB = 1024, 1024 * 1024


def measure(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    import horovod.torch as hvd
    from collectives import init_torch_gloo, inner_calls
    from stats import load_average, measure_alternating

    torch.set_num_threads(1)
    hvd.init()
    init_torch_gloo(hvd.rank(), hvd.size())
    results = []
    for size in [4 * KiB * 4**k for k in range(10) if 4 * KiB * 4**k <= args.max_bytes]:
        elements = size // 4
        # Random vectors (each rank its own): Adasum's coefficients then differ from 1.
        generator = torch.Generator().manual_seed(hvd.rank())
        ours, theirs = torch.randn(elements, generator=generator), torch.randn(elements, generator=generator)
        timed = measure_alternating(
            {
                "sum": lambda t=ours, tag=f"as.sum.{elements}": hvd.allreduce(t, op=hvd.Sum, name=tag),
                "adasum": lambda t=ours, tag=f"as.ada.{elements}": hvd.allreduce(t, op=hvd.Adasum, name=tag),
                "torch": lambda t=theirs: dist.all_reduce(t),
            },
            inner=dict.fromkeys(("sum", "adasum", "torch"), inner_calls(size)),
            repeats=args.repeats,
            before_each=hvd.barrier,
        )
        ratio = paired_ratio(timed["adasum"]["samples"], timed["sum"]["samples"])
        results.append({"bytes": size, **timed, "adasum_over_sum": ratio, "load": load_average()})
    if hvd.rank() == 0:
        setting = {k: os.environ.get(k, "") for k in ("HOROVOD_GLOO_SHARED_MEMORY", "HOROVOD_CPU_OPERATIONS")}
        with open(args.out, "w") as f:
            json.dump({"ranks": hvd.size(), "env": setting, "repeats": args.repeats, "results": results}, f)
    dist.destroy_process_group()
    hvd.shutdown()


def table(data: dict, title: str) -> list[str]:
    """hvd's Sum and Adasum (median times), their paired ratio, and torch.distributed's sum."""
    from stats import fmt_time, human_bytes

    load = data["results"][-1]["load"]
    lines = [f"{title} ({data['ranks']} ranks, {data['repeats']} repetitions; load {load})", ""]
    lines.append("| float32 bytes | hvd Sum | hvd Adasum | Adasum / Sum | torch gloo sum | torch sum / hvd Adasum |")
    lines.append("|---|---|---|---|---|---|")
    for r in data["results"]:
        adasum, total, torch_sum = r["adasum"]["median"], r["sum"]["median"], r["torch"]["median"]
        lines.append(
            f"| {human_bytes(r['bytes'])} | {fmt_time(total)} | {fmt_time(adasum)} | {r['adasum_over_sum']:.2f} "
            f"| {fmt_time(torch_sum)} | {torch_sum / adasum:.2f} |"
        )
    return lines


def main() -> None:
    sweep_main(measure, table, max_bytes=64 * MiB)


if __name__ == "__main__":
    main()
