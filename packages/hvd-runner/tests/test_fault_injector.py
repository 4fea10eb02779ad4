"""The fault injector of the namespace cluster (horovod.runner.testing.faults): each fault does to a
host what it says, is undone, and the seeded schedule is the same for the same seed."""

from __future__ import annotations

import contextlib
import itertools
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from horovod.runner.testing import _sshd
from horovod.runner.testing.faults import KINDS, LASTING, FaultInjector, NoTarget, schedule
from horovod.runner.testing.netns_cluster import NetnsCluster, cluster_for_tests

pytestmark = pytest.mark.timeout(120)
MARKER = "fault_target_worker"


@pytest.fixture(scope="module")
def cluster() -> Iterator[NetnsCluster]:
    # Its own prefix and subnet: the other tests' cluster may be in use at the same time.
    yield from cluster_for_tests(hosts=2, prefix="hvdi", subnet=13)


@pytest.fixture()
def worker(cluster: NetnsCluster) -> Iterator[subprocess.Popen[bytes]]:
    """A process on host 1 whose command line names MARKER, as a worker's names its script."""
    proc = subprocess.Popen(
        cluster.command(cluster.hosts[1], [sys.executable, "-c", "import time; time.sleep(60)", MARKER])
    )
    deadline = time.monotonic() + 10
    while not cluster.processes(cluster.hosts[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
    yield proc
    proc.kill()
    proc.wait()
    FaultInjector(cluster, MARKER, log=lambda line: None).restore()


def _states(pids: list[int]) -> set[str]:
    """The scheduler states of the pids still there (T: stopped)."""
    found = set()
    for pid in pids:
        with contextlib.suppress(FileNotFoundError):
            found.add(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0])
    return found


def _eventually(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Signals arrive asynchronously: true once ``condition()`` is."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _answers_ssh(cluster: NetnsCluster, host: str) -> bool:
    done = cluster.run(
        cluster.hosts[0],
        ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=2", host, "true"],
        timeout=20,
        capture_output=True,
    )
    return done.returncode == 0


def test_kill_rank_kills_a_worker_and_nothing_else(cluster: NetnsCluster, worker: subprocess.Popen[bytes]) -> None:
    injector = FaultInjector(cluster, MARKER, log=lambda line: None)
    with pytest.raises(NoTarget, match="no worker runs on"):
        injector.kill_rank(cluster.hosts[0])
    assert "killed" in injector.kill_rank(cluster.hosts[1])
    assert worker.wait(timeout=10) == -9
    assert _sshd.running(cluster.dir / cluster.namespace(cluster.hosts[1]) / "sshd.pid")


def test_freeze_stops_every_process_of_the_host_until_thawed(
    cluster: NetnsCluster, worker: subprocess.Popen[bytes]
) -> None:
    lines: list[str] = []
    injector = FaultInjector(cluster, MARKER, log=lines.append)
    host = cluster.hosts[1]
    fault = schedule(0, 1000, [host], kinds=["freeze"])[0]
    injector.inject(fault)
    pids = injector._frozen[host]
    assert pids and _eventually(lambda: _states(pids) == {"T"}), _states(pids)
    assert not _answers_ssh(cluster, host)  # its sshd is frozen too
    injector.undo(fault)
    assert _eventually(lambda: "T" not in _states(pids)), _states(pids)
    assert _answers_ssh(cluster, host)
    assert lines[0].startswith(f"fault: freeze on {host}") and lines[1].startswith(f"fault over: freeze on {host}")


def test_partition_and_sshd_gone_are_undone(cluster: NetnsCluster) -> None:
    injector = FaultInjector(cluster, MARKER, log=lambda line: None)
    host = cluster.hosts[1]
    injector.partition(host)
    assert not _answers_ssh(cluster, host)
    injector.heal(host)
    assert _answers_ssh(cluster, host)
    injector.sshd_gone(host)
    assert not _answers_ssh(cluster, host)
    injector.sshd_back(host)
    assert _answers_ssh(cluster, host)


def test_kill_host_kills_all_but_sshd(cluster: NetnsCluster, worker: subprocess.Popen[bytes]) -> None:
    injector = FaultInjector(cluster, MARKER, log=lambda line: None)
    assert "killed" in injector.kill_host(cluster.hosts[1])
    worker.wait(timeout=10)
    assert _eventually(lambda: cluster.processes(cluster.hosts[1]) == []), cluster.processes(cluster.hosts[1])
    assert _answers_ssh(cluster, cluster.hosts[1])


def test_the_schedule_is_seeded_and_spares_the_launchers_host() -> None:
    hosts = ["h0", "h1", "h2"]
    faults = schedule(7, 3600, hosts, spared=["h0"])
    assert faults == schedule(7, 3600, hosts, spared=["h0"]) and faults != schedule(8, 3600, hosts, spared=["h0"])
    assert {f.kind for f in faults} == set(KINDS)
    assert all(f.host != "h0" for f in faults if f.kind != "kill_rank")
    for fault, following in itertools.pairwise(faults):
        assert 20 <= following.at - fault.at <= 60
        assert (fault.lasts > 0) == (fault.kind in LASTING) and fault.at + fault.lasts < following.at
