"""The chaos soak: an elastic torch job (soak_train.py) over three network-namespace hosts with real
sshd, while seeded random faults hit them (hvd-runner's :mod:`horovod.runner.testing.faults`): a
fault every 20 to 60 s, for ``HVD_SOAK_SECONDS`` (100 by default: CI's short run; ``nox -s soak``
runs 20 minutes). The launcher runs on host 0, which only loses ranks; hosts 1 and 2 are also
frozen, partitioned, killed whole and lose their sshd. The discovery script follows the faults: a
frozen or partitioned host is left out until it is back.

Checked at the end: the job ends by itself once the soak says stop (no hang), every recovery came
within RECOVERY_BOUND_S, every step was committed exactly once, the weights are identical on every
rank, and the final world is the three hosts. The per-fault table (time to the first error, time
to the next commit) is printed, and written as markdown where ``HVD_SOAK_REPORT`` says.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

import pytest

from horovod.runner.testing.faults import LASTING, FaultInjector, NoTarget, schedule, wait_until
from horovod.runner.testing.netns_cluster import NetnsCluster, cluster_for_tests

SOAK_S = float(os.environ.get("HVD_SOAK_SECONDS", "100"))
SEED = int(os.environ.get("HVD_SOAK_SEED", "1"))
#: The longest a recovery may take: a partition is noticed at the Gloo timeout (30 s), then the
#: world re-forms without the host.
RECOVERY_BOUND_S = 120.0
WORKER = str(Path(__file__).with_name("soak_train.py"))
#: What the launcher logs as a world breaks (a fault's first error, as the job sees it).
ERROR_RE = re.compile(r"failed|is over|lost|leaves the job|not answer|timed out")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(SOAK_S + 420)]


@pytest.fixture(scope="module")
def cluster() -> Iterator[NetnsCluster]:
    # Its own prefix and subnet: other packages' tests may run their clusters at the same time.
    yield from cluster_for_tests(hosts=3, prefix="hvdk", subnet=8)


class Lines:
    """A stream's lines with the moment each arrived (time.monotonic()), read in a thread."""

    def __init__(self, stream: TextIO) -> None:
        self.lines: list[tuple[float, str]] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: TextIO) -> None:
        for line in stream:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def first(self, pattern: re.Pattern[str], after: float) -> float | None:
        return next((t for t, line in list(self.lines) if t >= after and pattern.search(line)), None)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def _listing(path: Path, hosts: list[str]) -> None:
    new = path.with_suffix(".new")
    new.write_text("".join(f"{h}:1\n" for h in hosts))
    os.replace(new, path)


def test_an_elastic_job_survives_random_faults(cluster: NetnsCluster, tmp_path: Path) -> None:
    hosts = list(cluster.hosts)
    listing, script, stop = tmp_path / "hosts.txt", tmp_path / "discover.sh", tmp_path / "STOP"
    _listing(listing, hosts)
    script.write_text(f"#!/bin/sh\ncat {listing}\n")
    script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env.update({"OMP_NUM_THREADS": "1", "STOP_FILE": str(stop)})
    argv = [
        *(sys.executable, "-m", "horovod.runner.launch", "--min-np", "1", "--max-np", "3"),
        *("--host-discovery-script", str(script), "--blacklist-cooldown-range", "5", "20", "--no-job-report"),
        *(sys.executable, WORKER),
    ]
    proc = subprocess.Popen(
        cluster.command(hosts[0], argv),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    out, err = Lines(proc.stdout), Lines(proc.stderr)
    injector = FaultInjector(cluster, "soak_train.py", log=lambda line: print(line, flush=True))
    faults = schedule(SEED, SOAK_S, hosts, spared=hosts[:1])
    rows: list[dict[str, object]] = []
    try:
        commit = re.compile(r"<stdout>:commit step=")
        assert _wait(lambda: out.first(commit, 0.0) is not None or proc.poll() is not None, 180), _tail(out, err)
        assert proc.poll() is None, _tail(out, err)
        start = time.monotonic()
        for fault in faults:
            wait_until(start + fault.at)
            assert proc.poll() is None, _tail(out, err)
            injected = time.monotonic()
            try:
                did = injector.inject(fault)
            except NoTarget as why:
                rows.append({"fault": fault.describe(), "at": fault.at, "did": f"skipped: {why}"})
                continue
            if fault.kind in ("freeze", "partition"):
                _listing(listing, [h for h in hosts if h != fault.host])
            if fault.kind in LASTING:
                wait_until(injected + fault.lasts)
                injector.undo(fault)
                _listing(listing, hosts)
            rows.append({"fault": fault.describe(), "at": fault.at, "did": did, "injected": injected})
        injector.restore()
        _listing(listing, hosts)
        # Every host back: the job grows to all three, then stops at the same step everywhere. The
        # last fault's own error may not have reached the launcher's log yet: judged after a pause.
        settled = time.monotonic() + 5.0
        assert _wait(lambda: time.monotonic() >= settled and _world_is_whole(err), 240), _tail(out, err)
        stop.write_text("stop\n")
        code = proc.wait(timeout=180)
    finally:
        injector.restore()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    out.join(10)
    err.join(10)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    assert code == 0, _tail(out, err)
    done = [dict(p.split("=", 1) for p in m.group(1).split()) for _, line in out.lines if (m := _DONE.search(line))]
    table = _table(rows, out, err, done)
    print(table, flush=True)
    if os.environ.get("HVD_SOAK_REPORT"):
        Path(os.environ["HVD_SOAK_REPORT"]).write_text(table + "\n")
    assert len(done) == 3 and {d["size"] for d in done} == {"3"}, done  # the final world: every host
    assert all(d["log_ok"] == "True" for d in done), done  # every step committed exactly once
    assert len({d["steps"] for d in done}) == 1 and len({d["checksum"] for d in done}) == 1, done
    for row in rows:
        recovery = row.get("recovered_s")
        assert recovery is None or recovery <= RECOVERY_BOUND_S, table


_DONE = re.compile(r"<stdout>:done (.*)")


def _wait(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return False


def _world_is_whole(err: Lines) -> bool:
    """The last world formed has 3 workers and nothing broke it since."""
    worlds = [(t, line) for t, line in list(err.lines) if "formed in" in line]
    return bool(worlds) and ": 3 worker(s)" in worlds[-1][1] and err.first(ERROR_RE, worlds[-1][0]) is None


def _table(rows: list[dict[str, object]], out: Lines, err: Lines, done: list[dict[str, str]]) -> str:
    """The per-fault table: when it came, what it did, the job's first error after it (before the
    next fault: later ones are the next fault's), and the first commit after that error (the
    recovery), in seconds from the fault; then what the workers ended with."""
    commit = re.compile(r"<stdout>:commit step=")
    lines = [
        f"Soak: {SOAK_S:.0f} s, seed {SEED}, {len(rows)} faults",
        "",
        "| at (s) | fault | what it did | first error after (s) | next commit after (s) |",
        "|---|---|---|---|---|",
    ]
    longest = 0.0
    injections = [row["injected"] for row in rows if isinstance(row.get("injected"), float)]
    for row in rows:
        injected = row.get("injected")
        error = recovered = None
        if isinstance(injected, float):
            following = [t for t in injections if isinstance(t, float) and t > injected]
            first_error = err.first(ERROR_RE, injected)
            if first_error is not None and following and first_error >= following[0]:
                first_error = None  # the next fault's
            if first_error is not None:
                error = first_error - injected
                next_commit = out.first(commit, first_error)
                if next_commit is not None:
                    recovered = next_commit - injected
                    row["recovered_s"] = recovered
                    longest = max(longest, recovered)
        lines.append(f"| {row['at']} | {row['fault']} | {row['did']} | {_seconds(error)} | {_seconds(recovered)} |")
    steps = ", ".join(sorted({d.get("steps", "?") for d in done}))
    sizes = ", ".join(sorted({d.get("size", "?") for d in done}))
    once = all(d.get("log_ok") == "True" for d in done)
    equal = len({d.get("checksum") for d in done}) == 1
    ending = (
        f"Longest recovery: {longest:.1f} s. The job ended with {len(done)} workers (world size {sizes}) at "
        f"step {steps}; every step committed exactly once on every worker: {once}; identical weights: {equal}."
    )
    lines += ["", ending]
    return "\n".join(lines)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _tail(out: Lines, err: Lines) -> str:
    return "\n".join(line for _, line in out.lines[-40:]) + "\n---\n" + "\n".join(line for _, line in err.lines[-60:])
