"""Autotune's reach: training throughput from deliberately poor engine settings (no fusion, a 50 ms
cycle) with ``--autotune``, against the same poor settings without it and against the defaults.

One launch per setting and model (the settings are the engine's, fixed for a launch):

    python benchmarks/autotune_training.py --out R.json [--models cnn,mlp] [--hosts]

starts each launch through horovodrun (``--hosts``: across two network-namespace hosts, root, via
hosts_table.run_hosts), where this file runs as a rank (``--rank-out``): it trains ``--steps`` steps
and rank 0 writes the images/s of the last ``--measure-steps`` (after tuning, for autotune), the
step at which the search ended, and the settings it kept. ``python autotune_training.py --table R.json``
prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
POOR = {"HOROVOD_FUSION_THRESHOLD": "0", "HOROVOD_CYCLE_TIME": "50"}
# A short search (the defaults take about 1,750 steps): 3 windows of 5 steps per setting.
QUICK_TUNING = {
    "HOROVOD_AUTOTUNE": "1",
    "HOROVOD_AUTOTUNE_START": "fusion_threshold_mb=0,cycle_time_ms=50",
    "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "5",
    "HOROVOD_AUTOTUNE_WINDOWS_PER_SAMPLE": "3",
    "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "1",
    "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "10",
}
SETTINGS = {"defaults": {}, "poor": POOR, "autotune from poor": QUICK_TUNING}


def run_rank(args: argparse.Namespace) -> None:
    """One rank: train, then measure the last steps; rank 0 writes what it saw."""
    import torch
    import torch.nn.functional as F

    import horovod.common
    import horovod.torch as hvd
    from training import MODELS

    torch.set_num_threads(1)
    hvd.init()
    torch.manual_seed(0)
    model = MODELS[args.model]()
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.01), named_parameters=model.named_parameters()
    )
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    data, target = torch.randn(args.batch_size, 3, 32, 32), torch.randint(0, 10, (args.batch_size,))
    tuned_at = None
    measured_from = args.steps - args.measure_steps
    start = 0.0
    for step in range(args.steps):
        if step == measured_from:
            hvd.barrier()
            start = time.perf_counter()
        optimizer.zero_grad()
        F.cross_entropy(model(data), target).backward()
        optimizer.step()
        if tuned_at is None and step % 10 == 0:
            search = horovod.common.autotune_state()["search"]
            if search is not None and search["phase"] == "done":
                tuned_at = step
    rate = args.batch_size * args.measure_steps / (time.perf_counter() - start)
    total = float(hvd.allreduce(torch.tensor([rate]), op=hvd.Sum, name="rate").item())
    state = horovod.common.autotune_state()
    if hvd.rank() == 0:
        search = state["search"]
        result = {
            "images_per_s": total,
            "settings": state["settings"],
            "tuned_at": tuned_at,
            "samples": search["samples"] if search else None,
            "load": os.getloadavg()[:2],
        }
        Path(args.rank_out).write_text(json.dumps(result))
    hvd.shutdown()


def launch(model: str, env: dict[str, str], steps: int, hosts: bool, tmp: str) -> dict:
    out = Path(tmp) / f"{model}-{len(os.listdir(tmp))}.json"
    args = ["--model", model, "--steps", str(steps), "--rank-out", str(out)]
    if hosts:
        from hosts_table import run_hosts

        return run_hosts(out, args, extra_env=env, script="autotune_training.py", timeout=1800)
    launcher = [sys.executable, "-m", "horovod.runner", "-np", "2", "-H", "localhost:2"]
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **env}
    subprocess.run([*launcher, sys.executable, str(HERE / "autotune_training.py"), *args], check=True, env=full_env)
    return json.loads(out.read_text())


def table(data: dict) -> list[str]:
    title = (
        f"{data['where']}, 2 ranks, batch 32 per rank, images/s of both ranks over the last "
        f"{data['measure_steps']} of {data['steps']} steps"
    )
    lines = [
        title,
        "",
        "| model | settings | images/s | over defaults | search ended at step | settings kept |",
        "|---|---|---|---|---|---|",
    ]
    for model, rows in data["results"].items():
        base = rows["defaults"]["images_per_s"]
        for name, r in rows.items():
            s = r["settings"]
            kept = f"{s['fusion_threshold'] / 2**20:.3g} MiB, {s['cycle_time_us'] / 1000:.3g} ms"
            tuned = r["tuned_at"] if r["tuned_at"] is not None else ""
            lines.append(
                f"| {model} | {name} | {r['images_per_s']:,.0f} | {r['images_per_s'] / base:.2f} | {tuned} | {kept} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", help="the results (JSON), from the launches this starts")
    parser.add_argument("--models", default="cnn,mlp")
    parser.add_argument("--steps", type=int, default=700)
    parser.add_argument("--measure-steps", type=int, default=150)
    parser.add_argument("--hosts", action="store_true", help="across two network-namespace hosts (root)")
    parser.add_argument("--table", help="print these results as markdown instead")
    # As a rank (started by the launches):
    parser.add_argument("--rank-out")
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    if args.table:
        print("\n".join(table(json.loads(Path(args.table).read_text()))))
    elif args.rank_out:
        run_rank(args)
    elif args.out:
        results: dict[str, dict] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for model in args.models.split(","):
                results[model] = {
                    name: launch(model, env, args.steps, args.hosts, tmp) for name, env in SETTINGS.items()
                }
        where = "across two namespace hosts" if args.hosts else "one host"
        data = {"where": where, "steps": args.steps, "measure_steps": args.measure_steps, "results": results}
        Path(args.out).write_text(json.dumps(data))
        print("\n".join(table(data)))
    else:
        parser.error("--out, --table or --rank-out is required")


if __name__ == "__main__":
    main()
