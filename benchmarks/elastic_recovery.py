"""Elastic recovery: from a worker's SIGKILL to the survivors' next committed step, hvd against torchrun.

    python benchmarks/elastic_recovery.py [--pairs 5] [--out raw.json]
    python benchmarks/run_all.py --only elastic        # the same table, within the benchmark run

Both jobs train the same tiny MLP (elastic_common.py), 3 workers on this machine, 1 intra-op
thread each, and commit every step; one worker SIGKILLs itself at step 40, once, before that step's
allreduce, after writing the time of its death:

- hvd (elastic_hvd_worker.py): ``horovodrun -np 3 --min-np 2 -H localhost:3``, hvd.DistributedOptimizer
  under hvd.elastic.run with a TorchState committed every step. The survivors get
  HorovodInternalError, restore the last commit, join a new world of 2 in the same processes and go
  on; the driver starts a replacement, which joins them at a later commit.
- torchrun (elastic_torchrun_worker.py): ``torchrun --nnodes=1 --nproc-per-node=3 --max-restarts=3
  --rdzv-backend=c10d``, DDP on torch.distributed's gloo, rank 0 checkpointing to a file every step.
  torchrun stops every worker and starts them all again, and they resume from the checkpoint.
  ``--nnodes=1`` and not ``1:2``: with a range, c10d's rendezvous waits out its ``last_call_timeout``
  (30 s by default) for a second node that never comes, at the start and again at each restart
  (``--torchrun-nnodes 1:2`` measures that). With ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``: by
  default the restarted workers share the agent's store with the dead ones' keys in it, and here
  most restarts failed to connect or hung (``--torchrun-shared-store`` measures that; see run_torchrun).

Recovery: the first committed step after the death (on the new world's rank 0) minus the death's
time. For hvd also "back to 3": the first committed step of a world of 3 again (the replacement
joined). The launches alternate, hvd then torchrun, then torchrun then hvd, ...; the ratio is
torchrun's recovery over hvd's, the median of each pair's. Every launch has a hard timeout; its
workers report events (elastic_common.record) from which the phases of each recovery are timed,
and the launchers' own lines are timestamped as they arrive.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from stats import load_average

HERE = Path(__file__).resolve().parent
NP, MIN_NP = 3, 2
KILL_STEP = 40
#: Launches of each framework (alternating pairs).
PAIRS = 5
#: Hard limit on one launch (a healthy one takes 10 to 20 s here).
LAUNCH_TIMEOUT_S = 120.0
#: Moments that begin a track of their own (the replacement's, beside the survivors').
TRACK_STARTS = {"replacement started"}
#: After the timeout: SIGTERM the launcher (it stops its workers), then SIGKILL what is left after this.
TERM_GRACE_S = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tool(name: str) -> str:
    """A console script of this interpreter's environment (horovodrun, torchrun), else from PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} not found beside {sys.executable} or on PATH")
    return found


def launch(command: list[str], events: Path, extra_env: dict[str, str], timeout_s: float) -> dict:
    """Runs one job to its end (or its hard timeout); returns its exit status, the workers' events and
    the launcher's output lines, each with the wall-clock time it was read."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HVD_BENCH_EVENTS": str(events), **extra_env}
    start, load_before = time.time(), load_average()
    proc = subprocess.Popen(
        command, cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    lines: list[tuple[float, str]] = []

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            lines.append((time.time(), raw.decode("utf-8", "replace").rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        returncode: int | None = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        returncode = None
        proc.send_signal(signal.SIGTERM)  # both launchers stop their workers on SIGTERM
        try:
            proc.wait(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the launcher's own group (we made it its session)
            proc.wait()
    reader.join(timeout=5.0)
    found = [json.loads(line) for line in events.read_text().splitlines()] if events.exists() else []
    if returncode is None:
        # Workers live in sessions of their own (horovodrun puts each in one): end any the launcher left.
        for pid in {e["pid"] for e in found}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return {
        "returncode": returncode,
        "wall_s": time.time() - start,
        "load_before": load_before,
        "load_after": load_average(),
        "events": found,
        "lines": lines,
    }


def _first(items: list[dict], after: float, min_step: int = -1, **match: object) -> dict | None:
    """The earliest of `items` after time `after` (with a step above `min_step`) matching `match`."""
    hits = [
        e
        for e in items
        if e["t"] > after and e.get("step", min_step + 1) > min_step and all(e.get(k) == v for k, v in match.items())
    ]
    return min(hits, key=lambda e: e["t"]) if hits else None


def _line_time(lines: list[tuple[float, str]], after: float, pattern: str) -> float | None:
    for t, line in lines:
        if t > after and re.search(pattern, line):
            return t
    return None


def analyse_hvd(run: dict) -> dict:
    ev = run["events"]
    death_ev = next((e for e in ev if e["event"] == "death"), None)
    if death_ev is None:
        return {"ok": False, "why": "no worker died"}
    death, died_at = death_ev["t"], death_ev["step"]
    # A commit after the death's time with a step at most the dying step's is one that was already
    # under way (the other ranks' commit of the step before): only a later step counts.
    commits = [e for e in ev if e["event"] == "commit"]
    first = _first(commits, death, died_at, rank=0)
    if first is None or run["returncode"] != 0:
        return {"ok": False, "why": f"no commit after the death (exit status {run['returncode']})"}
    full = _first(commits, death, died_at, rank=0, size=NP)
    initial = {e["worker"] for e in ev if e["event"] == "start" and e["t"] < death}
    newcomer = next((e for e in ev if e["event"] == "start" and e["worker"] not in initial), None)

    def rel(t: float | None) -> float | None:
        return None if t is None else t - death

    def first_t(event: str, **match: object) -> float | None:
        hit = _first(ev, death, event=event, **match)
        return None if hit is None else hit["t"]

    return {
        "ok": True,
        "recovery_s": first["t"] - death,
        "full_s": rel(full["t"]) if full else None,
        "phases": {
            # The launcher's lines (timestamped as they reach us) and the workers' events, from the death.
            "driver saw the exit": rel(_line_time(run["lines"], death, r"elastic: worker \d+ .*failed")),
            "error raised in survivors": rel(first_t("restore")),
            "new world formed (driver)": rel(_line_time(run["lines"], death, r"elastic: world 1 formed")),
            "survivors re-initialised": rel(first_t("reset", size=NP - 1)),
            "state synced": rel(first_t("sync_end", size=NP - 1)),
            "first commit": first["t"] - death,
            "replacement started": rel(newcomer["t"]) if newcomer else None,
            "replacement asked to join (driver announces it)": rel(
                _line_time(run["lines"], death, r"elastic: worker\(s\) .* ready to join")
            ),
            "world of 3 re-initialised": rel(first_t("reset", size=NP)),
            # The replacement's init() returns with the survivors' (the same world), but it still builds
            # its model and optimizer before it calls sync(): the survivors wait in the broadcast.
            "replacement entered sync (model and optimizer built)": rel(
                first_t("sync_start", worker=newcomer["worker"]) if newcomer else None
            ),
            "world of 3 synced": rel(first_t("sync_end", size=NP)),
            "first commit with 3 again": rel(full["t"]) if full else None,
        },
        "death_step": death_ev["step"],
        "first_step": first["step"],
    }


def analyse_torchrun(run: dict) -> dict:
    ev = run["events"]
    death_ev = next((e for e in ev if e["event"] == "death"), None)
    if death_ev is None:
        return {"ok": False, "why": "no worker died"}
    death = death_ev["t"]
    first = _first([e for e in ev if e["event"] == "commit"], death, death_ev["step"], rank=0)
    if first is None or run["returncode"] != 0:
        return {"ok": False, "why": f"no step after the death (exit status {run['returncode']})"}
    restart = first["restart"]  # the restart whose workers got going (an earlier one may have failed)

    def group_t(event: str) -> float | None:
        hits = [e["t"] for e in ev if e["event"] == event and e["restart"] == restart]
        return min(hits) - death if hits else None

    agent_saw = _line_time(run["lines"], death, r"failed \(exitcode: -9\)")

    return {
        "ok": True,
        "recovery_s": first["t"] - death,
        "restarts": restart,
        "phases": {
            "agent saw the exit": None if agent_saw is None else agent_saw - death,
            "workers restarted (process start)": group_t("start"),
            "process group formed (init_process_group)": group_t("joined"),
            "checkpoint loaded, DDP built": group_t("resumed"),
            "first step": first["t"] - death,
        },
        "death_step": death_ev["step"],
        "first_step": first["step"],
    }


def run_hvd(tmp: Path, i: int, timeout_s: float) -> dict:
    events = tmp / f"hvd-{i}.jsonl"
    command = [
        tool("horovodrun"), "-np", str(NP), "--min-np", str(MIN_NP), "-H", f"localhost:{NP}",
        sys.executable, str(HERE / "elastic_hvd_worker.py"), "--np", str(NP), "--kill-step", str(KILL_STEP),
    ]  # fmt: skip
    run = launch(command, events, {}, timeout_s)
    return {**analyse_hvd(run), **_launch_facts(run)}


def _launch_facts(run: dict) -> dict:
    return {"load": (run["load_before"], run["load_after"]), "wall_s": run["wall_s"], "raw": run}


def run_torchrun(tmp: Path, i: int, nnodes: str, shared_store: bool, timeout_s: float) -> dict:
    events = tmp / f"torchrun-{i}.jsonl"
    command = [
        tool("torchrun"), f"--nnodes={nnodes}", f"--nproc-per-node={NP}", "--max-restarts=3",
        "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}",
        str(HERE / "elastic_torchrun_worker.py"), "--checkpoint", str(tmp / f"torchrun-{i}.pt"),
        "--kill-step", str(KILL_STEP),
    ]  # fmt: skip
    # torchrun's default since torch 2.5 shares the agent's TCPStore with the workers' process group,
    # and the store outlives a restart: the restarted workers can read the dead ones' addresses
    # (pytorch/pytorch#135712). Here that made restarted groups fail to connect or hang in
    # init_process_group; torch's opt-out gives each restart a store of its own.
    env = {} if shared_store else {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    run = launch(command, events, env, timeout_s)
    return {**analyse_torchrun(run), **_launch_facts(run)}


def measure(pairs: int, nnodes: str = "1", shared_store: bool = False, timeout_s: float = LAUNCH_TIMEOUT_S) -> dict:
    """Alternating launches: hvd then torchrun, then torchrun then hvd, ...: neither always goes first."""
    runs: dict[str, list[dict]] = {"hvd": [], "torchrun": []}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for i in range(pairs):
            for framework in ("hvd", "torchrun") if i % 2 == 0 else ("torchrun", "hvd"):
                if framework == "hvd":
                    result = run_hvd(tmp, i, timeout_s)
                else:
                    result = run_torchrun(tmp, i, nnodes, shared_store, timeout_s)
                if not result["ok"]:
                    tail = "\n".join(line for _, line in result["raw"]["lines"][-30:])
                    print(f"elastic: {framework} launch {i} did not recover: {result['why']}\n{tail}", file=sys.stderr)
                runs[framework].append(result)
    return {"pairs": pairs, "nnodes": nnodes, "shared_store": shared_store, **runs}


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f} s"


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def elastic_tables(data: dict) -> list[str]:
    hvd_runs, torch_runs = data["hvd"], data["torchrun"]
    rows = [
        (
            f"### Elastic recovery: {NP} workers, one SIGKILLed at step {KILL_STEP}, hvd against torchrun "
            "(time from the death to the next committed step)"
        ),
        "",
        f"hvd: `horovodrun -np {NP} --min-np {MIN_NP} -H localhost:{NP}`, hvd.DistributedOptimizer under",
        "hvd.elastic.run, TorchState committed every step; the survivors go on in the same processes.",
        f"torchrun: `torchrun --nnodes={data['nnodes']} --nproc-per-node={NP} --max-restarts=3 "
        "--rdzv-backend=c10d`"
        + ("" if data["shared_store"] else " with `TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`")
        + ", DDP (gloo),",
        "a checkpoint file written by rank 0 every step; torchrun restarts every worker, which resume from it.",
        "Tiny MLP (32-64-10, batch 32), 1 intra-op thread per worker. Recovery: the new world's rank 0's first",
        f'committed step after the death. hvd\'s "back to {NP}": its first committed step with the replacement',
        f"worker in. Launches alternate; {data['pairs']} of each. torchrun/hvd: the median of each pair's ratio.",
        "",
        (
            f"| launch | hvd recovery | hvd back to {NP} | torchrun recovery | torchrun restarts used | "
            "torchrun/hvd | load 1m/5m (hvd; torchrun) |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    ratios = []
    for i, (h, t) in enumerate(zip(hvd_runs, torch_runs, strict=True)):
        ratio = t["recovery_s"] / h["recovery_s"] if h["ok"] and t["ok"] else None
        if ratio is not None:
            ratios.append(ratio)
        rows.append(
            f"| {i + 1} | {_s(h.get('recovery_s')) if h['ok'] else 'failed: ' + h['why']} | {_s(h.get('full_s'))} | "
            f"{_s(t.get('recovery_s')) if t['ok'] else 'failed: ' + t['why']} | {t.get('restarts', '-')} | "
            f"{'-' if ratio is None else f'{ratio:.1f}'} | {h['load'][0]}; {t['load'][0]} |"
        )
    h_ok = [r for r in hvd_runs if r["ok"]]
    t_ok = [r for r in torch_runs if r["ok"]]
    rows.append(
        f"| **median** | **{_s(_median([r['recovery_s'] for r in h_ok]))}** | "
        f"**{_s(_median([r['full_s'] for r in h_ok]))}** | **{_s(_median([r['recovery_s'] for r in t_ok]))}** | "
        f"{_median([r['restarts'] for r in t_ok]) if t_ok else '-'} | "
        f"**{'-' if not ratios else f'{statistics.median(ratios):.1f}'}** | |"
    )
    for name, runs in (("hvd", h_ok), ("torchrun", t_ok)):
        title = f"{name}: where the time goes (median over {len(runs)} launches, from the death)"
        if not runs:
            continue
        rows += ["", f"#### {title}", "", "| moment | since the death | since the moment before |", "|---|---|---|"]
        previous = 0.0
        for phase in runs[0]["phases"]:
            if phase in TRACK_STARTS:  # a second track, in parallel with the survivors': from the death again
                previous = 0.0
            value = _median([r["phases"].get(phase) for r in runs])
            step = None if value is None or previous is None else value - previous
            rows.append(f"| {phase} | {_s(value)} | {'-' if step is None else f'{step:+.2f} s'} |")
            if value is not None:
                previous = value
    return rows


def elastic_section(
    pairs: int = PAIRS,
    nnodes: str = "1",
    shared_store: bool = False,
    timeout_s: float = LAUNCH_TIMEOUT_S,
    out: str | None = None,
) -> list[str]:
    data = measure(pairs, nnodes, shared_store, timeout_s)
    if out:
        Path(out).write_text(json.dumps(data, indent=1))
    return elastic_tables(data)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=PAIRS, help="launches of each framework")
    parser.add_argument(
        "--torchrun-nnodes", default="1", help="torchrun's --nnodes (1:2 waits 30 s at each rendezvous on one node)"
    )
    parser.add_argument(
        "--torchrun-shared-store",
        action="store_true",
        help="torchrun's default TCPStore sharing (restarts can fail or hang here: pytorch/pytorch#135712)",
    )
    parser.add_argument("--timeout", type=float, default=LAUNCH_TIMEOUT_S, help="hard limit on each launch, seconds")
    parser.add_argument("--out", help="also write every launch's events and output (JSON) here")
    args = parser.parse_args()
    flags = "".join(
        (
            f" --pairs {args.pairs}",
            "" if args.torchrun_nnodes == "1" else f" --torchrun-nnodes {args.torchrun_nnodes}",
            " --torchrun-shared-store" if args.torchrun_shared_store else "",
        )
    )
    lines = [
        (
            f"Machine: {os.cpu_count()} cores, load average at start {load_average()}; "
            f"command: `python benchmarks/elastic_recovery.py{flags}`"
        ),
        "",
        *elastic_section(args.pairs, args.torchrun_nnodes, args.torchrun_shared_store, args.timeout, args.out),
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
