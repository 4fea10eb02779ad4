"""What the job-end report's counting and the timeline cost a training job: the same 2-rank jobs
through horovodrun with the engine's counters off (HOROVOD_JOB_REPORT_DISABLE=1), on (the default),
and on with every rank writing its timeline (--timeline-all-ranks), launched in rotation so that
all three see the same load.

    python job_report_overhead.py [--repeats 7] [--out results.json]

Two jobs: the synthetic CNN benchmark (examples/pytorch/pytorch_synthetic_benchmark.py: images/s
per rank, which only its measured iterations count) and the digits example
(examples/pytorch/pytorch_digits.py: the seconds its training epochs take, as it prints them).
Printed: each job's medians per setting, the median of the repetitions' paired ratios (setting /
off throughput: 1.00 means no cost) and the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
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
        [str(EXAMPLES / "pytorch_synthetic_benchmark.py"), "--model", "cnn", "--num-iters", "10"],
        _images_per_second,
    ),
    # 200 epochs: the example prints its time to a tenth of a second, too coarse for its default 20.
    "digits (training epochs per minute)": (
        [str(EXAMPLES / "pytorch_digits.py"), "--epochs", "200"],
        _epochs_per_minute,
    ),
}


#: setting -> what it adds to the jobs' environment
SETTINGS = {
    "off": {"HOROVOD_JOB_REPORT_DISABLE": "1"},
    "report": {},
    "report+timeline": {"HOROVOD_TIMELINE": "", "HOROVOD_TIMELINE_ALL_RANKS": "1"},  # path: per run
}


def run(command: list[str], setting: str, scratch: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env["OMP_NUM_THREADS"] = "1"
    env.update(SETTINGS[setting])
    if "HOROVOD_TIMELINE" in env:
        env["HOROVOD_TIMELINE"] = str(scratch / "timeline.json")
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
    with tempfile.TemporaryDirectory() as scratch:
        for job, (command, throughput) in JOBS.items():
            samples: dict[str, list[float]] = {setting: [] for setting in SETTINGS}
            for _ in range(args.repeats):
                for setting in SETTINGS:
                    samples[setting].append(throughput(run(command, setting, Path(scratch))))
            results[job] = {"samples": samples}
            line = [f"{job}: off {statistics.median(samples['off']):.1f}"]
            for setting in list(SETTINGS)[1:]:
                ratios = [a / b for a, b in zip(samples[setting], samples["off"], strict=True)]
                results[job][f"{setting}_paired_ratio_median"] = statistics.median(ratios)
                line.append(
                    f"{setting} {statistics.median(samples[setting]):.1f}, paired ratio to off median "
                    f"{statistics.median(ratios):.3f} (range {min(ratios):.3f} to {max(ratios):.3f})"
                )
            print("; ".join(line) + f"; {args.repeats} rounds", flush=True)
    print(f"load after: {load_average()}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
