"""What the job-end report's counting costs a training job: the same 2-rank jobs through horovodrun
with the engine's counters on (the default) and off (HOROVOD_JOB_REPORT_DISABLE=1), launched in
alternation so that both see the same load.

    python job_report_overhead.py [--repeats 7] [--out results.json]

Two jobs: the synthetic CNN benchmark (examples/pytorch/pytorch_synthetic_benchmark.py: images/s
per rank, which only its measured iterations count) and the digits example
(examples/pytorch/pytorch_digits.py: the seconds its training epochs take, as it prints them).
Printed: each job's medians on and off, the median of the repetitions' paired ratios (on / off
throughput: 1.00 means no cost) and the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

from stats import load_average

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "pytorch"


def _images_per_second(out: str) -> float:
    return float(_found(r"Img/sec per CPU: ([0-9.]+)", out).group(1))


def _epochs_per_minute(out: str) -> float:
    found = _found(r"(\d+) epochs in ([0-9.]+) s", out)
    return 60.0 * int(found.group(1)) / float(found.group(2))


def _found(pattern: str, out: str) -> re.Match[str]:
    found = re.search(pattern, out)
    if found is None:
        raise SystemExit(f"no {pattern!r} in the job's output:\n{out[-2000:]}")
    return found


#: job -> (its command after horovodrun's flags, its throughput from rank 0's output: higher is better)
JOBS = {
    "synthetic CNN (img/s per rank)": (
        [str(EXAMPLES / "pytorch_synthetic_benchmark.py"), "--model", "cnn", "--num-iters", "6"],
        _images_per_second,
    ),
    "digits (training epochs per minute)": ([str(EXAMPLES / "pytorch_digits.py")], _epochs_per_minute),
}


def run(command: list[str], report_on: bool) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env["OMP_NUM_THREADS"] = "1"
    if not report_on:
        env["HOROVOD_JOB_REPORT_DISABLE"] = "1"
    launcher = [sys.executable, "-m", "horovod.runner.launch", "-np", "2", "-H", "localhost:2", "--no-job-report"]
    done = subprocess.run([*launcher, sys.executable, *command], capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", help="the samples and medians, as JSON")
    args = parser.parse_args()
    results = {}
    print(f"load before: {load_average()}", flush=True)
    for job, (command, throughput) in JOBS.items():
        on: list[float] = []
        off: list[float] = []
        for _ in range(args.repeats):
            off.append(throughput(run(command, report_on=False)))
            on.append(throughput(run(command, report_on=True)))
        ratios = [a / b for a, b in zip(on, off, strict=True)]
        results[job] = {"on": on, "off": off, "paired_ratio_median": statistics.median(ratios)}
        print(
            f"{job}: counters on {statistics.median(on):.1f}, off {statistics.median(off):.1f}; "
            f"on/off paired ratio median {statistics.median(ratios):.3f} "
            f"(range {min(ratios):.3f} to {max(ratios):.3f}, {args.repeats} pairs)",
            flush=True,
        )
    print(f"load after: {load_average()}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
