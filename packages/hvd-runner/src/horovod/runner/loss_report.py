"""The launcher tells the surviving ranks which rank was lost, and how.

When a rank fails, its peers' collectives are cut off: their transport sees a closed connection, or
their negotiation sees the rank shut Horovod down, but neither says why. The launcher knows: the
exception the rank reported (:mod:`horovod.runner.exit_report`) and its exit status or signal. It
writes one line about the first rank lost under ``horovod.common.config.failure_report_key(job)``
in the job's store (hvd-core's engine waits briefly for that key when peers stopped it and adds the
line to the ``HorovodInternalError`` every surviving rank raises).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from horovod.runner.local import RankExit, Report


class LossReporter:
    """Describes the first rank lost, adding what is learnt about it later (its exit after its report).

    A rank failing with ``HorovodInternalError`` (a secondary report) is a survivor, not the lost
    rank: its exit is not published. A stopped rank is only provisional: it is withdrawn when the
    rank runs again, and a rank that really fails replaces it.
    """

    def __init__(self, publish: Callable[[str], None], hosts: Mapping[int, str], reports: Mapping[int, Report]) -> None:
        self._publish = publish
        self._hosts = hosts
        self._reports = reports
        self._lock = threading.Lock()
        self._lost: int | None = None  # the first rank that really failed
        self._parts: list[str] = []
        self._stopped: dict[int, str] = {}  # rank -> description, while it is stopped

    def rank_reported(self, rank: int, reason: str) -> None:
        """A rank reported the exception it is failing with (a primary report)."""
        self._add(rank, reason)

    def rank_failed(self, exit_: RankExit) -> None:
        """A rank's process ended with a non-zero status or a signal."""
        report = self._reports.get(exit_.rank)
        if report is not None and not report.primary:
            return  # it failed because Horovod stopped under it: a consequence, not the lost rank
        # A remote rank's pid here is its ssh's: the host (named with the rank) says where it ran.
        process = "its process" if exit_.host is not None else f"its process (pid {exit_.pid})"
        self._add(exit_.rank, f"{process} {exit_.describe()}")

    def rank_stopped(self, rank: int, pid: int) -> None:
        """A rank's process is stopped: alive, but its peers can only time out waiting for it."""
        with self._lock:
            self._stopped[rank] = f"its process (pid {pid}) is stopped (SIGSTOP, or held by a debugger)"
            self._publish_locked()

    def rank_resumed(self, rank: int) -> None:
        """A rank seen stopped runs again: it is no longer a reason for its peers' failures."""
        with self._lock:
            if self._stopped.pop(rank, None) is not None:
                self._publish_locked()

    def _add(self, rank: int, part: str) -> None:
        with self._lock:
            if self._lost is None:
                self._lost = rank
            elif self._lost != rank:
                return  # the first lost rank is what survivors need; later ones usually follow from it
            self._parts.append(part)
            self._publish_locked()

    def _publish_locked(self) -> None:
        if self._lost is not None:
            rank, parts = self._lost, self._parts
        elif self._stopped:
            rank = min(self._stopped)
            parts = [self._stopped[rank]]
        else:
            self._publish("")  # withdrawn: hvd-core ignores an empty report
            return
        self._publish(f"rank {rank} (on {self._hosts.get(rank, '?')}): " + "; ".join(parts))
