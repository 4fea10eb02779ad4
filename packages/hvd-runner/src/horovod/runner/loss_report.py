"""The launcher tells the surviving ranks which rank was lost, and how.

When a rank fails, its peers' collectives are cut off: their transport sees a closed connection, or
their negotiation sees the rank shut Horovod down, but neither says why. The launcher knows: the
exception the rank reported (:mod:`horovod.runner.exit_report`) and its exit status or signal. It
writes one line about the first rank lost under ``<job key>/lost`` in the job's store (the contract
with hvd-core, whose engine waits briefly for that key when peers stopped it and adds the line to
the ``HorovodInternalError`` every surviving rank raises).
"""

from __future__ import annotations

import threading
from typing import Callable, Mapping

from horovod.runner.local import RankExit


def key(job_key: str) -> str:
    """The store key hvd-core's engine reads (``failure_report_key`` in horovod/common/config.py)."""
    return f"{job_key}/lost"


class LossReporter:
    """Describes the first rank lost, adding what is learnt about it later (its exit after its report)."""

    def __init__(self, publish: Callable[[str], None], hosts: Mapping[int, str]) -> None:
        self._publish = publish
        self._hosts = hosts
        self._lock = threading.Lock()
        self._rank: int | None = None
        self._parts: list[str] = []

    def rank_reported(self, rank: int, reason: str) -> None:
        """A rank reported the exception it is failing with (a primary report)."""
        self._add(rank, reason)

    def rank_failed(self, exit_: RankExit) -> None:
        """A rank's process ended with a non-zero status or a signal."""
        self._add(exit_.rank, f"its process (pid {exit_.pid}) {exit_.describe()}")

    def rank_stopped(self, rank: int, pid: int) -> None:
        """A rank's process is stopped: alive, but its peers can only time out waiting for it."""
        self._add(rank, f"its process (pid {pid}) is stopped (SIGSTOP, or held by a debugger)")

    def _add(self, rank: int, part: str) -> None:
        with self._lock:
            if self._rank is None:
                self._rank = rank
            elif self._rank != rank:
                return  # the first lost rank is what survivors need; later ones usually follow from it
            self._parts.append(part)
            line = f"rank {rank} (on {self._hosts.get(rank, '?')}): " + "; ".join(self._parts)
            self._publish(line)
