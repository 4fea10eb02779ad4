"""Injects each fault into a real 3-rank job under horovodrun and prints the table of
docs/failure-handling.md: what every rank saw and how long until the job ended.

    python docs/fault_table.py            # in an environment with hvd-runner and hvd-backend-gloo

Rank 1 injects the fault 0.5 s after a warm-up collective, while ranks 0 and 2 wait for it in an
allreduce. Times are measured from the injection (each rank prints time.time(); one machine).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time

RANK_CODE = textwrap.dedent(
    """\
    import os, signal, sys, time
    import numpy as np
    import horovod.common as hvd
    hvd.init()
    hvd.allreduce(np.ones(4, np.float32), name="warm_up")
    fault = os.environ["FAULT"]
    if hvd.rank() == 1:
        time.sleep(0.5)
        print("injected", repr(time.time()), flush=True)
        if fault == "stall":
            time.sleep(60)  # alive, but never submits 'gradients'
        if fault == "exception": raise RuntimeError("injected failure")
        if fault == "sys.exit(3)": sys.exit(3)
        if fault == "SIGKILL": os.kill(os.getpid(), signal.SIGKILL)
        if fault == "SIGSEGV": os.kill(os.getpid(), signal.SIGSEGV)
        if fault == "SIGSTOP": os.kill(os.getpid(), signal.SIGSTOP)
    try:
        hvd.allreduce(np.ones(1 << 16, np.float32), name="gradients")
    except hvd.HorovodInternalError as error:
        print("raised", repr(time.time()), error, flush=True)
        raise
    """
)

FAULTS = {
    "exception": {},
    "sys.exit(3)": {},
    "SIGKILL": {},
    "SIGSEGV": {},
    "SIGSTOP": {"HOROVOD_GLOO_TIMEOUT_SECONDS": "5"},
    "stall": {"HOROVOD_STALL_CHECK_TIME_SECONDS": "2", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "5"},
}


def shorten(error: str) -> str:
    error = re.sub(r" \(Gloo: [^)]*\)", "", error)
    error = re.sub(r"pid \d+", "pid N", error)
    error = error.split(" This usually means")[0]
    return error if len(error) < 400 else error[:400] + "..."


def run(fault: str, extra: dict[str, str]) -> tuple[str, dict[int, tuple[float, str]], float, str, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env.update(extra, FAULT=fault, OMP_NUM_THREADS="1")
    argv = [
        sys.executable,
        "-m",
        "horovod.runner.launch",
        "-np",
        "3",
        "-H",
        "localhost:3",
        sys.executable,
        "-c",
        RANK_CODE,
    ]
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
    ended = time.time()
    injected, raised = None, {}
    for line in result.stdout.splitlines():
        m = re.match(r"\[(\d+)\]<stdout>:(injected|raised) (\S+) ?(.*)", line)
        if m and m.group(2) == "injected":
            injected = float(m.group(3))
        elif m:
            raised[int(m.group(1))] = (float(m.group(3)), m.group(4))
    verdict = next((line for line in result.stderr.splitlines() if "job failed" in line), "")
    verdict = verdict.replace("horovodrun: ", "")
    base = injected or ended
    return (
        verdict,
        {r: (t - base, shorten(e)) for r, (t, e) in raised.items()},
        ended - base,
        result.stderr,
        result.returncode,
    )


def main() -> None:
    print(
        "| fault on rank 1 | what ranks 0 and 2 raise (HorovodInternalError) | raised after | horovodrun "
        "| job ended after |"
    )
    print("|---|---|---|---|---|")
    for fault, extra in FAULTS.items():
        verdict, raised, total, _, code = run(fault, extra)
        settings = " ".join(f"{k}={v}" for k, v in extra.items())
        messages = {e for _, e in raised.values()}
        seen = "<br>".join(sorted(messages)) or "(nothing)"
        after = ", ".join(f"rank {r}: {t:.2f} s" for r, (t, _) in sorted(raised.items()))
        label = fault + (f" ({settings})" if settings else "")
        print(
            f"| {label} | {seen} | {after} | exit {code}: {re.sub(r'pid [0-9]+', 'pid N', verdict)} | {total:.1f} s |"
        )


if __name__ == "__main__":
    main()
