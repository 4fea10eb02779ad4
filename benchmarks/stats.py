"""Timing helpers shared by the benchmarks: repetitions, medians, spread, machine load."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

# The sweep's name for hvd.allreduce, which returns a new tensor. torch.distributed reduces in place
# only, so its side copies the input first (clone, then all_reduce), as a torch user does to keep it.
OUT_OF_PLACE = "allreduce-out-of-place"


def measure(fn: Callable[[], None], *, warmup: int = 3, repeats: int = 7, inner: int = 1) -> dict:
    """Median and spread (min, max) of `repeats` timings of `inner` calls, after `warmup` calls."""
    return measure_alternating({"fn": fn}, inner={"fn": inner}, warmup=warmup, repeats=repeats)["fn"]


def measure_alternating(
    fns: dict[str, Callable[[], None]],
    *,
    inner: dict[str, int],
    warmup: int = 3,
    repeats: int = 7,
    before_each: Callable[[], None] | None = None,
) -> dict:
    """Median, spread and samples of each function's timings, one repetition of each in turn: on a
    noisy machine, functions whose ratio matters see the same load (and each repetition's pair of
    samples gives a ratio of its own). `before_each`, untimed, runs before every repetition (a
    barrier, so that ranks start a repetition together)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            if before_each is not None:
                before_each()
            start = time.perf_counter()
            for _ in range(inner[name]):
                fn()
            samples[name].append((time.perf_counter() - start) / inner[name])
    return {name: summary(s) for name, s in samples.items()}


def summary(samples: list[float]) -> dict:
    """Median, spread and the samples themselves, as the tables read them."""
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "n": len(samples),
        "samples": samples,
    }


def paired_ratio(samples: list[float], reference: list[float]) -> float:
    """The median over repetitions of sample / reference, taken in the same repetition."""
    return statistics.median(s / r for s, r in zip(samples, reference, strict=True))


def load_average() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f}/{five:.2f}"


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}"
        n /= 1024
    return str(n)


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def spread(s: dict) -> str:
    """A measurement as the tables show it: median [min..max]."""
    return f"{fmt_time(s['median'])} [{fmt_time(s['min'])}..{fmt_time(s['max'])}]"


def sweep_main(measure: Callable, table: Callable[[dict, str], list[str]], max_bytes: int, repeats: int = 9) -> None:
    """The command line of a sweep that rank 0 writes as JSON (``--out``, run under the launcher)
    and that prints its files as markdown (``--table``): ``measure(args)`` or ``table(data, title)``."""
    import argparse
    import json

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", help="where rank 0 writes the results (JSON)")
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--max-bytes", type=int, default=max_bytes, help="the largest float32 tensor")
    parser.add_argument("--table", nargs="+", metavar="JSON", help="print these results as markdown instead")
    args = parser.parse_args()
    if args.table:
        for path in args.table:
            with open(path) as f:
                print("\n".join(table(json.load(f), os.path.basename(path))), end="\n\n")
    elif args.out:
        measure(args)
    else:
        parser.error("--out or --table is required")
