"""Faults injected into a running job on a network-namespace cluster (:mod:`.netns_cluster`).

Each fault hits one host of the cluster, at a chosen moment or at seeded random ones
(:func:`schedule`), and is logged with the moment it took effect:

- ``kill_rank``: SIGKILL of one worker process of the host (a crashed rank);
- ``kill_host``: SIGKILL of every process of the host but its sshd (a rebooted machine's jobs);
- ``freeze``: SIGSTOP of every process of the host, sshd included, sockets left open (a machine
  that hangs), until ``thaw`` (SIGCONT);
- ``partition``: the host's link down (it drops out of the network, its processes run on), until
  ``heal``;
- ``sshd_gone``: the host's sshd stopped (running sessions go on; new ones are refused), until
  ``sshd_back``.

The ones that last (freeze, partition, sshd_gone) end after the fault's ``lasts`` seconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import signal
import time
from collections.abc import Callable, Sequence

from horovod.runner.testing import _cleanup
from horovod.runner.testing.netns_cluster import NetnsCluster

#: Every kind of fault, and the ones that last until undone.
KINDS = ("kill_rank", "kill_host", "freeze", "partition", "sshd_gone")
LASTING = ("freeze", "partition", "sshd_gone")
#: Command-line words of the processes that start workers, whose command lines name the worker too.
_LAUNCHERS = {"horovod.runner.launch", "horovodrun", "horovod.runner.remote_rank"}


@dataclasses.dataclass(frozen=True)
class Fault:
    kind: str
    host: str
    #: Seconds after the schedule's start.
    at: float
    #: Seconds until it is undone (0: instant).
    lasts: float = 0.0

    def describe(self) -> str:
        return f"{self.kind} on {self.host}" + (f" for {self.lasts:.0f} s" if self.lasts else "")


def schedule(
    seed: int,
    duration_s: float,
    hosts: Sequence[str],
    *,
    gap_s: tuple[float, float] = (20.0, 60.0),
    lasts_s: tuple[float, float] = (5.0, 20.0),
    kinds: Sequence[str] = KINDS,
    spared: Sequence[str] = (),
) -> list[Fault]:
    """A fault every ``gap_s`` seconds (uniform) over ``duration_s``, each on one of ``hosts``, of
    one of ``kinds``; the same seed gives the same faults. A lasting fault ends before the next.
    The ``spared`` hosts (the launcher's) only lose ranks: no fault there takes the whole host."""
    rng = random.Random(seed)
    faults: list[Fault] = []
    at = rng.uniform(*gap_s)
    while at < duration_s:
        kind = rng.choice(list(kinds))
        targets = [h for h in hosts if kind == "kill_rank" or h not in spared]
        gap = rng.uniform(*gap_s)
        lasts = min(rng.uniform(*lasts_s), gap - 1.0) if kind in LASTING else 0.0
        faults.append(Fault(kind, rng.choice(targets), round(at, 1), round(max(lasts, 0.0), 1)))
        at += gap
    return faults


class NoTarget(Exception):
    """The host has no process the fault could hit (no worker running there now)."""


class FaultInjector:
    """Injects faults into ``cluster``'s hosts; ``worker_marker`` is a string in every worker's
    command line (its script's name), which tells workers from other processes."""

    def __init__(self, cluster: NetnsCluster, worker_marker: str, log: Callable[[str], None] = print) -> None:
        self.cluster = cluster
        self.worker_marker = worker_marker
        self.log = log
        self._frozen: dict[str, list[int]] = {}

    def inject(self, fault: Fault) -> str:
        """Starts ``fault``; returns what it did (raises NoTarget when there was nothing to hit)."""
        start: Callable[[str], str] = getattr(self, fault.kind)
        done = start(fault.host)
        self.log(f"fault: {fault.describe()}: {done}")
        return done

    def undo(self, fault: Fault) -> str:
        """Ends a lasting fault (thaw, heal, sshd back)."""
        done = {"freeze": self.thaw, "partition": self.heal, "sshd_gone": self.sshd_back}[fault.kind](fault.host)
        self.log(f"fault over: {fault.describe()}: {done}")
        return done

    # --- the faults -----------------------------------------------------------------------------

    def kill_rank(self, host: str) -> str:
        workers = self._workers(host)
        if not workers:
            raise NoTarget(f"no worker runs on {host}")
        pid = random.choice(workers)
        _signal([pid], signal.SIGKILL)
        return f"worker process {pid} killed"

    def kill_host(self, host: str) -> str:
        pids = self.cluster.processes(host)
        if not pids:
            raise NoTarget(f"nothing runs on {host} but its sshd")
        _signal(pids, signal.SIGKILL)
        return f"{len(pids)} process(es) killed"

    def freeze(self, host: str) -> str:
        pids = self._all(host)
        _signal(pids, signal.SIGSTOP)
        self._frozen[host] = pids
        return f"{len(pids)} process(es) stopped (sshd among them)"

    def thaw(self, host: str) -> str:
        pids = self._frozen.pop(host, [])
        _signal(pids, signal.SIGCONT)
        return f"{len(pids)} process(es) continued"

    def partition(self, host: str) -> str:
        self.cluster.pause_host(host)
        return "link down"

    def heal(self, host: str) -> str:
        self.cluster.resume_host(host)
        return "link up"

    def sshd_gone(self, host: str) -> str:
        self.cluster.stop_sshd(host)
        return "sshd stopped"

    def sshd_back(self, host: str) -> str:
        self.cluster.start_sshd(host)
        return "sshd started"

    def restore(self) -> None:
        """Undoes every lasting fault still in effect (the end of a soak, or a failed test)."""
        for host in list(self._frozen):
            self.thaw(host)
        self.cluster.restore()

    # --- helpers --------------------------------------------------------------------------------

    def _all(self, host: str) -> list[int]:
        nets = _cleanup.net_ids([self.cluster.namespace(host)])
        return sorted(pid for pid, net, _ in _cleanup.processes() if net in nets)

    def _workers(self, host: str) -> list[int]:
        nets = _cleanup.net_ids([self.cluster.namespace(host)])
        return sorted(
            pid
            for pid, net, cmdline in _cleanup.processes()
            if net in nets and self.worker_marker in cmdline and not _LAUNCHERS.intersection(cmdline.split())
        )


def _signal(pids: Sequence[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # ended meanwhile
            os.kill(pid, sig)


def wait_until(moment: float, clock: Callable[[], float] = time.monotonic) -> None:
    """Sleeps until ``clock()`` reaches ``moment``."""
    while (left := moment - clock()) > 0:
        time.sleep(min(left, 0.5))
