"""Runs every benchmark through horovodrun and prints one table (markdown), with the machine's load.

    python benchmarks/run_all.py [--np 2] [--markdown BENCHMARKS.md]

Each figure is a median of repeated runs after warm-up, shown with its spread; every hvd figure
has its torch.distributed (gloo) counterpart from the same processes, and the ratio is what counts
on this noisy machine. The collectives run twice: with hvd's default transport between ranks on one
host (shared memory), and over TCP as ranks on different hosts would be. hvd on MPI
(hvd-backend-mpi, with mpi4py's Allreduce beside it when installed) needs mpirun, so it is a second
launch (``horovodrun --mpi``), compared with hvd on Gloo through the torch.distributed baseline that
both launches measure.
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
from pathlib import Path

from stats import OUT_OF_PLACE, fmt_time, human_bytes, load_average

HERE = Path(__file__).resolve().parent
# The ranks of these runs share one host: hvd's Gloo backend connects them through shared memory,
# while torch.distributed's gloo uses TCP on loopback.
SHARED_MEMORY = "through shared memory (its default on one host)"
# The training benchmark alternates 1-rank and N-rank launches this many times each (see training_table).
TRAINING_LAUNCH_PAIRS = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def horovodrun(
    np: int, script: str, *args: str, mpi: bool = False, timeout: int = 1800, extra_env: dict[str, str] | None = None
) -> None:
    env = {**os.environ, "HVD_BENCH_TORCH_PORT": str(free_port()), "OMP_NUM_THREADS": "1", **(extra_env or {})}
    if mpi:  # MPICH prefixes each write of a rank: unbuffered Python would print lines in pieces
        env.pop("PYTHONUNBUFFERED", None)
    launcher = ["horovodrun", *(["--mpi"] if mpi else []), "-np", str(np), "-H", f"localhost:{np}"]
    subprocess.run(
        [*launcher, sys.executable, str(HERE / script), *args], check=True, env=env, cwd=HERE, timeout=timeout
    )


def mpi_missing() -> str | None:
    """Why hvd on MPI cannot run here (horovodrun --mpi's own check), or None."""
    from horovod.runner.errors import UsageError
    from horovod.runner.mpi_run import find_mpi

    try:
        find_mpi(os.environ)
    except UsageError as error:
        return str(error)
    return None


def spread(s: dict) -> str:
    return f"{fmt_time(s['median'])} [{fmt_time(s['min'])}..{fmt_time(s['max'])}]"


def collectives_table(data: dict, transport: str) -> list[str]:
    n = data["ranks"]
    rows = [
        (
            f"### Collectives, {n} ranks, hvd on Gloo {transport} "
            f"(float32; time per op: median [min..max] of {data['results'][0]['hvd']['n']} runs)"
        ),
        "",
        "| op | size | hvd time | torch.distributed time | hvd busbw | torch busbw | hvd/torch busbw | load 1m/5m |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in data["results"]:
        if r["bench"] not in ("allreduce", OUT_OF_PLACE, "allgather", "broadcast", "reducescatter", "alltoall"):
            continue
        bus_h, bus_t = (r["bytes"] / r[side]["median"] * r["busbw_factor"] for side in ("hvd", "torch"))
        rows.append(
            f"| {r['bench']} | {human_bytes(r['bytes'])} | {spread(r['hvd'])} | {spread(r['torch'])} | "
            f"{bus_h / 1e9:.3f} GB/s | {bus_t / 1e9:.3f} GB/s | {bus_h / bus_t:.2f} | {r['load']} |"
        )
    for r in data["results"]:
        if r["bench"] == "latency":
            rows += [
                "",
                f"### Small-op latency (4-byte allreduce, one at a time), hvd on Gloo {transport}",
                "",
                "| hvd | torch.distributed | hvd/torch | load |",
                "|---|---|---|---|",
                (
                    f"| {spread(r['hvd'])} | {spread(r['torch'])} | "
                    f"{r['hvd']['median'] / r['torch']['median']:.2f} | {r['load']} |"
                ),
            ]
        if r["bench"] == "fusion":
            rows += [
                "",
                f"### Fusion: 200 tensors of 1,024 float32 per round, hvd on Gloo {transport}",
                "",
                "hvd's round and the floor are measured in alternation; hvd/floor is the median of each",
                "repetition's ratio.",
                "",
                (
                    "| hvd (async, fused) | torch one by one | torch async | floor: one all_reduce of all 200 | "
                    "hvd/floor | torch one-by-one/hvd | load |"
                ),
                "|---|---|---|---|---|---|---|",
                (
                    f"| {spread(r['hvd'])} | {spread(r['torch_one_by_one'])} | {spread(r['torch_async'])} | "
                    f"{spread(r['floor'])} | {r['paired_ratio']:.2f} | "
                    f"{r['torch_one_by_one']['median'] / r['hvd']['median']:.1f} | {r['load']} |"
                ),
            ]
    return rows


def mpi_table(data: dict, gloo: dict | None) -> list[str]:
    """hvd on MPI beside torch.distributed and mpi4py (same processes); hvd on Gloo through the common baseline."""
    n = data["ranks"]
    gloo_ratio = {}
    for r in (gloo or {}).get("results", []):
        if r["bench"] == "allreduce":
            gloo_ratio[r["bytes"]] = r["torch"]["median"] / r["hvd"]["median"]
    rows = [
        f"### Allreduce on MPI, {n} ranks (float32; launched by horovodrun --mpi; time per op: median [min..max])",
        "",
        (
            "hvd on MPI, torch.distributed (gloo) and mpi4py's Allreduce run in the same processes. hvd on Gloo "
            "ran in another launch (the table above): its column is compared through the baseline both launches "
            "measured, hvd/torch.distributed busbw in each."
        ),
        "",
        (
            "| size | hvd on MPI | torch.distributed | mpi4py Allreduce | hvd-MPI busbw | hvd-MPI/torch busbw | "
            "hvd-MPI/mpi4py busbw | hvd-Gloo/torch busbw (above) | load 1m/5m |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in data["results"]:
        hvd_mpi, torch_t, mpi4py = r["hvd_mpi"]["median"], r["torch"]["median"], r.get("mpi4py")
        bus = r["bytes"] * r["busbw_factor"] / hvd_mpi
        # Same bytes and factor on each side: a busbw ratio is the inverse ratio of times.
        vs_mpi4py = f"{mpi4py['median'] / hvd_mpi:.2f}" if mpi4py else "-"
        vs_gloo = f"{gloo_ratio[r['bytes']]:.2f}" if r["bytes"] in gloo_ratio else "-"
        rows.append(
            f"| {human_bytes(r['bytes'])} | {spread(r['hvd_mpi'])} | {spread(r['torch'])} | "
            f"{spread(mpi4py) if mpi4py else 'not installed'} | {bus / 1e9:.3f} GB/s | {torch_t / hvd_mpi:.2f} | "
            f"{vs_mpi4py} | {vs_gloo} | {r['load']} |"
        )
    return rows


def training_table(singles: list[dict], multis: list[dict]) -> list[str]:
    """One row per model and framework from alternating launches: 1 rank, N ranks, 1 rank, ...

    Scaling efficiency compares two launches, and launch-to-launch noise is this machine's largest
    (the no-communication row has read 85% to 122%), so it is given per pair of neighbouring
    launches, as the median and range over the pairs. The ratios between frameworks come from
    within each N-rank launch, whose frameworks run in alternating blocks.
    """
    n = multis[0]["ranks"]
    rows = [
        "### Synthetic training (batch 32 per rank, 1 intra-op thread per rank), images/s",
        "",
        f"`local`: the same step with no communication, {n} processes side by side: the most any",
        "data-parallel framework can reach on this machine. `lockstep`: the local step, then a 4-byte",
        "allreduce, so the ranks meet once per step without moving gradients: what synchronous steps",
        "alone cost where step times vary. `vs lockstep`: a framework's throughput over lockstep's.",
        f"Medians of {len(multis)} pairs of launches (1 rank, then {n}); scaling efficiency per pair:",
        "median [min..max].",
        "",
        f"| model | framework | 1 rank | {n} ranks total | scaling efficiency | vs DDP ({n} ranks) | vs lockstep |",
        "|---|---|---|---|---|---|---|",
    ]

    def total(run: dict, key: str) -> float:
        return run["results"][key]["total"]

    for model in ("cnn", "mlp"):
        for fw in ("hvd", "ddp", "local", "lockstep"):
            key = f"{model}.{fw}"
            one = statistics.median(total(run, key) for run in singles)
            many = statistics.median(total(run, key) for run in multis)
            efficiency = [total(m, key) / (n * total(s, key)) for s, m in zip(singles, multis, strict=True)]
            vs_ddp = statistics.median(total(run, key) / total(run, f"{model}.ddp") for run in multis)
            vs_lockstep = statistics.median(total(run, key) / total(run, f"{model}.lockstep") for run in multis)
            rows.append(
                f"| {model} | {fw} | {one:.1f} | {many:.1f} | {statistics.median(efficiency):.0%} "
                f"[{min(efficiency):.0%}..{max(efficiency):.0%}] | {vs_ddp:.2f} | {vs_lockstep:.2f} |"
            )
    return rows


def startup_table(np: int, repeats: int = 5) -> list[str]:
    code = "import horovod.torch as hvd; hvd.init(); hvd.shutdown()"

    def launcher() -> float:
        start = time.perf_counter()
        subprocess.run(
            ["horovodrun", "-np", str(np), "-H", f"localhost:{np}", sys.executable, "-c", code],
            check=True,
            capture_output=True,
            timeout=300,
        )
        return time.perf_counter() - start

    def bare() -> float:
        start = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(np)]
        for p in procs:
            assert p.wait(timeout=300) == 0
        return time.perf_counter() - start

    # Alternated, each going first in turn: both see the same minutes of this noisy machine, and
    # neither always finds the caches the other left.
    with_runs, without_runs = [], []
    order = [(launcher, with_runs), (bare, without_runs)]
    for i in range(repeats):
        for timed, runs in order if i % 2 == 0 else order[::-1]:
            runs.append(timed())
    with_launcher, without = statistics.median(with_runs), statistics.median(without_runs)
    return [
        f"### Start-up ({np} ranks, median of {repeats})",
        "",
        "| horovodrun + init | the same processes, no launcher | launcher overhead | load |",
        "|---|---|---|---|",
        f"| {with_launcher:.2f} s | {without:.2f} s | {with_launcher - without:.2f} s | {load_average()} |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--markdown", help="also write the tables to this file")
    parser.add_argument("--only", choices=["collectives", "tcp", "mpi", "training", "startup"], action="append")
    parser.add_argument("--max-bytes", type=int, help="largest allreduce of the sweeps (default: 256 MiB)")
    args = parser.parse_args()
    only = set(args.only or ["collectives", "tcp", "mpi", "training", "startup"])
    sweep_args = ["--repeats", str(args.repeats)] + (["--max-bytes", str(args.max_bytes)] if args.max_bytes else [])
    lines = [
        (
            f"Machine: {os.cpu_count()} cores, load average at start {load_average()}; "
            f"command: `python benchmarks/run_all.py --np {args.np}`"
        ),
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        gloo = None
        if "collectives" in only:
            out = Path(tmp) / "collectives.json"
            horovodrun(args.np, "collectives.py", "--out", str(out), *sweep_args)
            gloo = json.loads(out.read_text())
            lines += [*collectives_table(gloo, SHARED_MEMORY), ""]
        if "tcp" in only:  # what ranks on different hosts get: the same sweep with shared memory off
            out = Path(tmp) / "collectives_tcp.json"
            horovodrun(
                args.np, "collectives.py", "--out", str(out), *sweep_args, extra_env={"HOROVOD_GLOO_SHARED_MEMORY": "0"}
            )
            lines += [*collectives_table(json.loads(out.read_text()), "over TCP (HOROVOD_GLOO_SHARED_MEMORY=0)"), ""]
        if "mpi" in only:
            missing = mpi_missing()
            if missing:
                lines += [f"### Allreduce on MPI: not measured ({missing})", ""]
            else:
                out = Path(tmp) / "mpi.json"
                horovodrun(args.np, "mpi_allreduce.py", "--out", str(out), *sweep_args, mpi=True)
                lines += [*mpi_table(json.loads(out.read_text()), gloo), ""]
        if "training" in only:
            runs: dict[int, list[dict]] = {1: [], args.np: []}
            for launch in range(TRAINING_LAUNCH_PAIRS):
                for ranks in runs:
                    out = Path(tmp) / f"training-{ranks}-{launch}.json"
                    horovodrun(ranks, "training.py", "--out", str(out))
                    runs[ranks].append(json.loads(out.read_text()))
            lines += [*training_table(runs[1], runs[args.np]), ""]
        if "startup" in only:
            lines += [*startup_table(args.np), ""]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")


if __name__ == "__main__":
    main()
