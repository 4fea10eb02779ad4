"""Runs every benchmark through horovodrun and prints one table (markdown), with the machine's load.

    python benchmarks/run_all.py [--np 2] [--markdown tables.md]
    python benchmarks/run_all.py --only tensorflow     # just the TensorFlow tables (ops and training)
    python benchmarks/run_all.py --only hosts          # just the collectives across two hosts (root)
    python benchmarks/run_all.py --only inline         # small cached ops across two hosts, inline on/off (root)
    python benchmarks/run_all.py --only eager          # cached ops across two hosts, eager messages on/off (root)
    python benchmarks/run_all.py --only elastic        # a worker SIGKILLed: hvd's elastic recovery against torchrun's

Each figure is a median of repeated runs after warm-up, shown with its spread; every hvd figure
has its torch.distributed (gloo) counterpart from the same processes, and the ratio is what counts
on this noisy machine. The collectives run twice: with hvd's default transport between ranks on one
host (shared memory), and over TCP as ranks on different hosts would be; then across two hosts
(network namespaces with sshd: root only, skipped elsewhere, see hosts_table.py), one rank each. hvd on MPI
(hvd-backend-mpi, with mpi4py's Allreduce beside it when installed) needs mpirun, so it is a second
launch (``horovodrun --mpi``), compared with hvd on Gloo through the torch.distributed baseline that
both launches measure. The TensorFlow tables put horovod.tensorflow beside horovod.torch in the same
processes (the adapter's cost), and Keras training with horovod.tensorflow against
tf.distribute.MultiWorkerMirroredStrategy in alternating launches.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eager_table import eager_section
from elastic_recovery import elastic_section
from hosts_table import hierarchical_section, hosts_section
from inline_table import inline_section
from stats import OUT_OF_PLACE, human_bytes, load_average, spread

HERE = Path(__file__).resolve().parent
# The ranks of these runs share one host: hvd's Gloo backend connects them through shared memory,
# while torch.distributed's gloo uses TCP on loopback.
SHARED_MEMORY = "through shared memory (its default on one host)"
# The training benchmark alternates 1-rank and N-rank launches this many times each (see training_table).
TRAINING_LAUNCH_PAIRS = 3
# What --only accepts; "tensorflow" stands for both TensorFlow benchmarks.
BENCHMARKS = [
    "collectives",
    "tcp",
    "hosts",
    "inline",
    "eager",
    "mpi",
    "training",
    "startup",
    "elastic",
    "tensorflow-ops",
    "tensorflow-training",
]
TENSORFLOW = ["tensorflow-ops", "tensorflow-training"]
# TensorFlow's C++ start-up chatter (oneDNN notices) would bury the ranks' output.
TF_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2"}


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


def tensorflow_missing() -> str | None:
    """Why the TensorFlow benchmarks cannot run here, or None."""
    for module, hint in (("tensorflow", "tensorflow-cpu"), ("horovod.tensorflow", "hvd-tensorflow")):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install {hint})"
    return None


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


def tensorflow_ops_tables(data: dict, transport: str) -> list[str]:
    """horovod.tensorflow beside horovod.torch (same engine, same processes): one allreduce, and a 200-tensor step."""
    n, repeats = data["ranks"], data["step"]["tf_grouped"]["n"]
    rows = [
        (
            f"### TensorFlow adapter: one allreduce, TF tensors against torch tensors, {n} ranks, hvd on Gloo "
            f"{transport} (float32; time per op: median [min..max] of {repeats} runs)"
        ),
        "",
        "horovod.tensorflow and horovod.torch on one engine in the same processes, timed alternately; each",
        "ratio is the median of the repetitions' ratios. torch: the out-of-place `hvd.allreduce` (TF's always",
        "returns a new tensor). tf.function: a `tf.function` doing one allreduce per call. Target: tf/torch <= 1.2.",
        "",
        "| size | horovod.torch | horovod.tensorflow, eager | tf/torch | tf.function | tf.function/torch | load |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in data["single"]:
        rows.append(
            f"| {human_bytes(r['bytes'])} | {spread(r['torch'])} | {spread(r['tf'])} | {r['tf_vs_torch']:.2f} | "
            f"{spread(r['tf_function'])} | {r['tf_function_vs_torch']:.2f} | {r['load']} |"
        )
    return [*rows, "", *tensorflow_step_table(data["step"], transport)]


# The TensorFlow ways through a step of many tensors, each with the horovod.torch way it is compared with.
TF_STEP_ROWS = [
    ("tf_one_by_one", "TF eager, `hvd.allreduce` one after another", "torch_one_by_one", "torch, one after another"),
    ("tf_grouped", "TF eager, `hvd.grouped_allreduce`", "torch_grouped", "torch `grouped_allreduce`"),
    ("tf_function_separate", "`tf.function` with 200 `hvd.allreduce`", "torch_async", "torch async, then synchronize"),
    ("tf_function_grouped", "`tf.function` with `hvd.grouped_allreduce`", "torch_grouped", "torch `grouped_allreduce`"),
]


def tensorflow_step_table(step: dict, transport: str) -> list[str]:
    in_flight = step["tf_function_separate"]["median"] / step["tf_one_by_one"]["median"]
    rows = [
        (
            f"### TensorFlow adapter: a step of {step['tensors']} tensors of {step['elements']:,} float32, "
            f"hvd on Gloo {transport}"
        ),
        "",
        "Every way alternates with the others, repetition by repetition; tf/torch is the median of the",
        "repetitions' ratios. The `tf.function` with 200 separate allreduces shows whether a step's ops are",
        f"in flight together (fused by the engine): it took {in_flight:.2f} x the time of TF's one after another.",
        "",
        "| TensorFlow | time per step | horovod.torch counterpart | its time | tf/torch | load |",
        "|---|---|---|---|---|---|",
    ]
    for tf_key, tf_label, torch_key, torch_label in TF_STEP_ROWS:
        rows.append(
            f"| {tf_label} | {spread(step[tf_key])} | {torch_label} | {spread(step[torch_key])} | "
            f"{step[tf_key + '_vs_torch']:.2f} | {step['load']} |"
        )
    return rows


def tensorflow_training_table(hvd_runs: list[dict], mwms_runs: list[dict]) -> list[str]:
    """horovod.tensorflow against MWMS from alternating launches, each launch with its own `local` yardstick.

    The two frameworks cannot share processes, so hvd/MWMS compares neighbouring launches (a pair),
    given as the median and range over the pairs; `/local` compares each framework with the
    no-communication step timed in alternating windows in its own processes, which launch-to-launch
    noise does not touch."""
    n = hvd_runs[0]["ranks"]
    loads = [run["load"][0] for run in (*hvd_runs, *mwms_runs)]
    rows = [
        (
            f"### TensorFlow synthetic training: horovod.tensorflow against MultiWorkerMirroredStrategy, {n} workers "
            "(batch 32 per worker, 1 intra-op thread each), images/s in total"
        ),
        "",
        "hvd: `hvd.DistributedGradientTape` in a `tf.function` step, under horovodrun. MWMS:",
        f"`tf.distribute.MultiWorkerMirroredStrategy` (RING), {n} worker processes on localhost (TF_CONFIG).",
        "`local`: the same step with no communication, timed in alternating windows in each launch's processes",
        "(MWMS's run TF's multi-worker runtime beside it). hvd/MWMS is the figure that counts (target >= 1.0).",
        f"Medians of {len(hvd_runs)} pairs of launches; hvd/MWMS per pair: median [min..max]. 1-minute load",
        f"during the launches: {min(loads):.2f} to {max(loads):.2f}.",
        "",
        (
            "| model | hvd | MWMS | hvd/MWMS | local (hvd's launches) | local (MWMS's) | hvd/local | MWMS/local | "
            "hvd/MWMS, each over its local |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def total(run: dict, key: str) -> float:
        return run["results"][key]["total"]

    for model in ("cnn", "mlp"):
        pairs = list(zip(hvd_runs, mwms_runs, strict=True))
        ratio = [total(h, f"{model}.hvd") / total(m, f"{model}.mwms") for h, m in pairs]
        hvd_local = [total(h, f"{model}.hvd") / total(h, f"{model}.local") for h in hvd_runs]
        mwms_local = [total(m, f"{model}.mwms") / total(m, f"{model}.local") for m in mwms_runs]
        over_local = [h / m for h, m in zip(hvd_local, mwms_local, strict=True)]
        med = statistics.median
        rows.append(
            f"| {model} | {med(total(h, f'{model}.hvd') for h in hvd_runs):.1f} | "
            f"{med(total(m, f'{model}.mwms') for m in mwms_runs):.1f} | "
            f"{med(ratio):.2f} [{min(ratio):.2f}..{max(ratio):.2f}] | "
            f"{med(total(h, f'{model}.local') for h in hvd_runs):.1f} | "
            f"{med(total(m, f'{model}.local') for m in mwms_runs):.1f} | "
            f"{med(hvd_local):.0%} | {med(mwms_local):.0%} | {med(over_local):.2f} |"
        )
    return rows


def run_tensorflow_training(np: int, tmp: str, pairs: int, windows: int) -> tuple[list[dict], list[dict]]:
    """Alternating launches, hvd then MWMS, then MWMS then hvd, ...: neither always runs first."""
    runs: dict[str, list[dict]] = {"hvd": [], "mwms": []}
    for pair in range(pairs):
        for framework in ("hvd", "mwms") if pair % 2 == 0 else ("mwms", "hvd"):
            out = Path(tmp) / f"tf-training-{framework}-{pair}.json"
            common = ["--framework", framework, "--out", str(out), "--windows", str(windows)]
            if framework == "hvd":
                horovodrun(np, "tensorflow_training.py", *common, extra_env=TF_ENV)
            else:  # the file's own launcher starts the MWMS workers (and stops them at its own deadline)
                env = {**os.environ, "OMP_NUM_THREADS": "1", **TF_ENV}
                command = [sys.executable, str(HERE / "tensorflow_training.py"), *common, "--np", str(np)]
                subprocess.run(command, check=True, env=env, cwd=HERE, timeout=1800)
            runs[framework].append(json.loads(out.read_text()))
    return runs["hvd"], runs["mwms"]


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
    parser.add_argument(
        "--only", choices=[*BENCHMARKS, "tensorflow"], action="append", help="tensorflow: both TensorFlow benchmarks"
    )
    parser.add_argument("--max-bytes", type=int, help="largest allreduce of the sweeps (default: 256 MiB)")
    parser.add_argument(
        "--launch-pairs", type=int, default=TRAINING_LAUNCH_PAIRS, help="pairs of launches of the training benchmarks"
    )
    parser.add_argument(
        "--hosts-launches", type=int, default=1, help="launches of the sweep across hosts, their repetitions pooled"
    )
    args = parser.parse_args()
    only = {name for asked in args.only or BENCHMARKS for name in (TENSORFLOW if asked == "tensorflow" else [asked])}
    sweep_args = ["--repeats", str(args.repeats)] + (["--max-bytes", str(args.max_bytes)] if args.max_bytes else [])
    # The command as it was run, but for where the tables were written: what the figures depend on.
    asked = [f"--np {args.np}", *(f"--only {o}" for o in args.only or []), f"--repeats {args.repeats}"]
    asked += [f"--max-bytes {args.max_bytes}"] if args.max_bytes else []
    asked += [f"--launch-pairs {args.launch_pairs}"] if args.launch_pairs != TRAINING_LAUNCH_PAIRS else []
    asked += [f"--hosts-launches {args.hosts_launches}"] if args.hosts_launches != 1 else []
    lines = [
        (
            f"Machine: {os.cpu_count()} cores, load average at start {load_average()}; "
            f"command: `python benchmarks/run_all.py {' '.join(asked)}`"
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
        if "hosts" in only:  # two namespace hosts, one rank each (skipped, saying why, where they cannot run)
            lines += [*hosts_section(tmp, sweep_args, args.hosts_launches), ""]
            lines += [*hierarchical_section(tmp), ""]
        if "inline" in only:
            lines += [*inline_section(tmp), ""]
        if "eager" in only:
            lines += [*eager_section(tmp), ""]
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
            for launch in range(args.launch_pairs):
                for ranks in runs:
                    out = Path(tmp) / f"training-{ranks}-{launch}.json"
                    horovodrun(ranks, "training.py", "--out", str(out))
                    runs[ranks].append(json.loads(out.read_text()))
            lines += [*training_table(runs[1], runs[args.np]), ""]
        if "startup" in only:
            lines += [*startup_table(args.np), ""]
        if "elastic" in only:  # 3 workers whatever --np: one dies, 2 go on (see elastic_recovery.py)
            lines += [*elastic_section(), ""]
        missing = tensorflow_missing() if only & set(TENSORFLOW) else None
        if missing:
            lines += [f"### TensorFlow: not measured ({missing})", ""]
        if "tensorflow-ops" in only and not missing:
            out = Path(tmp) / "tensorflow_ops.json"
            ops_args = ["--repeats", str(args.repeats)] + (
                ["--max-bytes", str(args.max_bytes)] if args.max_bytes else []
            )
            horovodrun(args.np, "tensorflow_ops.py", "--out", str(out), *ops_args, extra_env=TF_ENV)
            lines += [*tensorflow_ops_tables(json.loads(out.read_text()), SHARED_MEMORY), ""]
        if "tensorflow-training" in only and not missing:
            hvd_runs, mwms_runs = run_tensorflow_training(args.np, tmp, args.launch_pairs, args.repeats)
            lines += [*tensorflow_training_table(hvd_runs, mwms_runs), ""]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")


if __name__ == "__main__":
    main()
