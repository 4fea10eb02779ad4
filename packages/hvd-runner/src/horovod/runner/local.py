"""Running the ranks of a job, and stopping all of them when one fails.

Each rank runs on this machine or, through ssh, on a remote host (:mod:`horovod.runner.rank_process`).
Each is started in its own session and process group (so a Ctrl-C at the terminal reaches
only the launcher, which then stops the ranks in order, and so a rank's own children are stopped
with it). The first rank to exit non-zero decides the job's exit status; every other rank gets a
few seconds to end on its own (its collectives fail, naming the lost rank), then is sent SIGTERM
(its whole process group), and SIGKILL after a grace period. Ranks are stopped the same way, at
once, when the launcher itself is interrupted. When the job ends, whatever a rank left running in its process
group is stopped the same way, so no process outlives the launcher.
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import Any, Protocol

from horovod.runner.exit_report import EXITING
from horovod.runner.hosts import Placement
from horovod.runner.output import OutputRouter
from horovod.runner.process_groups import shell_status
from horovod.runner.rank_process import RankProcess
from horovod.runner.ssh import SSH_FAILED

#: Seconds between SIGTERM and SIGKILL.
DEFAULT_GRACE_S = 3.0
#: Seconds the other ranks get, once one has failed, to raise the error naming it and end on their
#: own (their collectives fail within moments) before they are sent SIGTERM.
DEFAULT_FAILURE_GRACE_S = 5.0
#: Seconds to wait for output pipes to close once the ranks have exited.
_DRAIN_S = 5.0


class LaunchError(RuntimeError):
    """A rank could not be started."""


@dataclasses.dataclass(frozen=True)
class RankSpec:
    placement: Placement
    argv: Sequence[str]
    env: dict[str, str]


#: Starts one rank (on this machine by default; a job across hosts passes one that uses ssh).
RankStarter = Callable[[RankSpec], RankProcess]


def start_here(spec: RankSpec) -> RankProcess:
    return RankProcess(spec.argv, spec.env)


@dataclasses.dataclass(frozen=True)
class RankExit:
    rank: int
    pid: int
    returncode: int
    #: When the launcher saw it end (time.monotonic()).
    ended: float = 0.0
    #: The remote host it ran on; None for a rank of this machine.
    host: str | None = None

    @property
    def where(self) -> str:
        """``pid 123`` here, ``on host h1`` for a remote rank (whose pid here is ssh's)."""
        return f"pid {self.pid}" if self.host is None else f"on host {self.host}"

    @property
    def exit_code(self) -> int:
        """The status a shell would report: the code, or 128 + the signal number."""
        return shell_status(self.returncode)

    def describe(self) -> str:
        if self.host is not None and self.returncode == SSH_FAILED:
            return (
                f"ended with ssh's own failure status {SSH_FAILED} (ssh could not reach {self.host}, or lost the "
                "connection: its message is among the rank's output)"
            )
        if self.returncode >= 0:
            return f"exited with code {self.returncode}"
        try:
            name = signal.Signals(-self.returncode).name
        except ValueError:
            name = f"signal {-self.returncode}"
        return f"was killed by signal {name}"


@dataclasses.dataclass(frozen=True)
class Report:
    """What a rank said when it began to end (:mod:`horovod.runner.exit_report`)."""

    #: When it arrived (time.monotonic()).
    at: float
    reason: str
    #: False for a consequence of a peer's failure (HorovodInternalError).
    primary: bool = True


@dataclasses.dataclass(frozen=True)
class Outcome:
    #: 0 when every rank succeeded, else the first failing rank's exit code.
    exit_code: int
    #: The rank that failed first, None if none did (see LocalJob for how "first" is decided).
    failed: RankExit | None
    #: How every rank ended, by rank.
    exits: dict[int, RankExit]


class RankObserver(Protocol):
    """Told, as the job runs, about ranks the others will miss (:mod:`horovod.runner.loss_report`)."""

    def rank_failed(self, exit_: RankExit) -> None:
        """A rank's process ended with a non-zero status or a signal."""

    def rank_stopped(self, rank: int, pid: int) -> None:
        """A rank's process is stopped (alive, but it cannot take part in collectives)."""

    def rank_resumed(self, rank: int) -> None:
        """A rank reported stopped runs again."""


class LocalJob:
    """Starts ``ranks``, forwards their output, waits for them and propagates the first failure.

    ``log`` receives the launcher's own messages (one line each, without newline).

    ``reports`` (rank -> :class:`Report`) is filled, while the job runs, with what ranks report
    when they begin to end. The rank named as the failure, whose exit code the job takes, is the
    failed rank that began to fail first: at its primary report, else at its exit. Ranks the
    launcher itself stopped only count if they had begun to fail before being stopped.
    """

    def __init__(
        self,
        ranks: Sequence[RankSpec],
        output: OutputRouter,
        *,
        log: Callable[[str], None],
        grace_s: float = DEFAULT_GRACE_S,
        start_timeout_s: float = 30.0,
        reports: Mapping[int, Report] | None = None,
        failure_grace_s: float = DEFAULT_FAILURE_GRACE_S,
        observer: RankObserver | None = None,
        starter: RankStarter = start_here,
    ) -> None:
        self._starter = starter
        self._ranks = list(ranks)
        self._failure_grace_s = failure_grace_s
        self._observer = observer
        self._stopped_polls: dict[int, int] = {}  # rank -> consecutive polls that found it stopped
        self._stopped_now: set[int] = set()  # ranks reported stopped, until they run again
        self._stopped_at_failure: set[int] = set()
        self._reports = reports if reports is not None else {}
        self._signaled: dict[int, float] = {}  # rank -> when the launcher sent it SIGTERM
        self._output = output
        self._log = log
        self._grace_s = grace_s
        self._start_timeout_s = start_timeout_s
        self._procs: dict[int, RankProcess] = {}
        # Rank exits from the waiter threads. A SimpleQueue's get() is C code that takes no lock a
        # Ctrl-C could leave held (queue.Queue's Python-level locking can), and an interrupted get()
        # takes no item: stopping the ranks after a signal reads this same queue.
        self._events: queue.SimpleQueue[tuple[int, int, float]] = queue.SimpleQueue()
        self._exits: dict[int, RankExit] = {}
        self._hurry = threading.Event()

    @property
    def pids(self) -> dict[int, int]:
        return {rank: proc.pid for rank, proc in self._procs.items()}

    def run(self) -> Outcome:
        """Runs the job to its end. On an exception (KeyboardInterrupt included) every rank is
        stopped before it propagates."""
        try:
            try:
                self._start_all()
                return self._wait()
            except BaseException:
                with self._signals_deferred():
                    self._stop(set(self._procs) - set(self._exits))
                raise
        finally:
            with self._signals_deferred():
                self._reap_leftovers()
                self._output.join(_DRAIN_S)
                self._output.close()

    # --- starting --------------------------------------------------------------------------

    def _start_all(self) -> None:
        # A signal arriving between fork and bookkeeping would leave an untracked rank behind: it
        # is held until every rank is registered, then delivered as usual.
        with _DeferSignals(self._hurry, redeliver=True):
            self._start_each()

    def _start_each(self) -> None:
        deadline = time.monotonic() + self._start_timeout_s
        for spec in self._ranks:
            rank = spec.placement.rank
            try:
                self._output.prepare(rank)
            except OSError as error:
                raise LaunchError(f"cannot create the output directory of rank {rank}: {error}") from error
            try:
                proc = self._starter(spec)
            except OSError as error:
                raise LaunchError(
                    f"cannot start rank {rank} ({' '.join(spec.argv[:1])}): {error.strerror or error}"
                ) from error
            self._procs[rank] = proc
            self._output.attach(rank, "stdout", proc.stdout)
            self._output.attach(rank, "stderr", proc.stderr)
            threading.Thread(target=self._await_exit, args=(rank, proc), name=f"hvd-wait-{rank}", daemon=True).start()
            if time.monotonic() > deadline:
                raise LaunchError(
                    f"starting the ranks took longer than the start timeout ({self._start_timeout_s:g} s); "
                    "raise it with --start-timeout or HOROVOD_START_TIMEOUT"
                )

    def _await_exit(self, rank: int, proc: RankProcess) -> None:
        returncode = proc.wait()
        self._events.put((rank, returncode, time.monotonic()))

    # --- waiting -------------------------------------------------------------------------

    def _record(self, rank: int, returncode: int, ended: float) -> RankExit:
        proc = self._procs[rank]
        exit_ = RankExit(rank, proc.pid, returncode, ended, proc.host)
        self._exits[rank] = exit_
        return exit_

    def _wait(self) -> Outcome:
        first: RankExit | None = None
        while len(self._exits) < len(self._procs):
            try:
                rank, returncode, ended = self._events.get(timeout=0.5)
            except queue.Empty:
                self._notice_stopped_ranks()
                continue
            exit_ = self._record(rank, returncode, ended)
            if returncode != 0 and self._observer is not None:
                self._observer.rank_failed(exit_)
            if returncode != 0 and first is None:
                first = exit_
                self._stopped_at_failure = set(self._stopped_now)
                others = set(self._procs) - set(self._exits)
                if others:
                    self._log(f"rank {rank} {exit_.describe()}; stopping the other {len(others)} rank(s)")
                    # They learn of the failure through their collectives: let them say so and end.
                    self._collect(others, time.monotonic() + self._failure_grace_s)
                with self._signals_deferred():
                    self._stop(others)
        if first is None:
            return Outcome(0, None, dict(self._exits))
        culprit = self._first_to_fail() or first
        message = f"job failed: rank {culprit.rank} ({culprit.where}) {culprit.describe()}"
        if culprit.rank in self._signaled and culprit.returncode in (-signal.SIGTERM, -signal.SIGKILL):
            message += " by horovodrun"
        report = self._reports.get(culprit.rank)
        if report is not None and report.reason != EXITING:
            message += f" ({report.reason})"
        if culprit is not first:
            message += f"; it began to fail first, although rank {first.rank} exited before it"
        if self._stopped_at_failure:
            ranks = ", ".join(map(str, sorted(self._stopped_at_failure)))
            message += f"; rank(s) {ranks} had been stopped (SIGSTOP, or held by a debugger) before"
        self._log(message)
        return Outcome(culprit.exit_code, culprit, dict(self._exits))

    def _notice_stopped_ranks(self) -> None:
        """Says so when a rank stays stopped (SIGSTOP, or held by a debugger) for two polls in a row:
        its peers can only time out waiting for it, and their errors should say why. A rank that
        runs again is withdrawn (a debugger's or profiler's short stop is not a failure)."""
        for rank, proc in self._procs.items():
            stopped = rank not in self._exits and proc.stopped()
            polls = self._stopped_polls.get(rank, 0) + 1 if stopped else 0
            self._stopped_polls[rank] = polls
            if polls == 2:
                self._stopped_now.add(rank)
                self._log(
                    f"rank {rank} (pid {proc.pid}) is stopped (SIGSTOP, or held by a debugger); "
                    "the other ranks will time out waiting for it"
                )
                if self._observer is not None:
                    self._observer.rank_stopped(rank, proc.pid)
            elif polls == 0 and rank in self._stopped_now:
                self._stopped_now.discard(rank)
                self._log(f"rank {rank} (pid {proc.pid}) runs again")
                if self._observer is not None:
                    self._observer.rank_resumed(rank)

    def _first_to_fail(self) -> RankExit | None:
        def began(e: RankExit) -> float:
            report = self._reports.get(e.rank)
            return min(report.at, e.ended) if report is not None and report.primary else e.ended

        candidates = []
        for e in self._exits.values():
            if e.returncode == 0:
                continue
            stopped_at = self._signaled.get(e.rank)
            if stopped_at is not None and began(e) >= stopped_at and e.returncode in (-signal.SIGTERM, -signal.SIGKILL):
                continue  # ended because the launcher stopped it
            candidates.append(e)
        return min(candidates, key=lambda e: (began(e), e.ended), default=None)

    # --- stopping --------------------------------------------------------------------------

    def _collect(self, ranks: set[int], until: float) -> None:
        """Records exits of ``ranks`` until all have exited or ``until`` (monotonic) passes."""
        while ranks - set(self._exits) and time.monotonic() < until and not self._hurry.is_set():
            try:
                rank, returncode, ended = self._events.get(timeout=0.05)
            except queue.Empty:
                continue
            self._record(rank, returncode, ended)

    def _stop(self, ranks: set[int]) -> None:
        """SIGTERM to the process groups of ``ranks``, SIGKILL to those still alive after the grace period.

        A rank that has reported it is ending (an uncaught exception, or its interpreter exiting) is
        left to finish on its own within the grace period, so that it exits with its own status.
        """
        live = {r for r in ranks if r in self._procs and r not in self._exits}
        if not live:
            return
        now = time.monotonic()
        for rank in live:
            if rank not in self._reports:
                self._signaled.setdefault(rank, now)
                self._procs[rank].terminate()
        self._collect(live, time.monotonic() + self._grace_s)
        stubborn = live - set(self._exits)
        if stubborn:
            self._log(
                f"rank(s) {', '.join(map(str, sorted(stubborn)))} still running after {self._grace_s:g} s; "
                "sending SIGKILL"
            )
        now = time.monotonic()
        for rank in stubborn:
            self._signaled.setdefault(rank, now)
            self._procs[rank].kill()
        self._hurry.clear()
        self._collect(stubborn, time.monotonic() + 30.0)

    def _reap_leftovers(self) -> None:
        """Stops what ranks left behind in their process groups (their own children)."""
        groups = [proc for proc in self._procs.values() if proc.group_alive()]
        if not groups:
            return
        for proc in groups:
            proc.terminate()
        deadline = time.monotonic() + self._grace_s
        while time.monotonic() < deadline and any(p.group_alive() for p in groups) and not self._hurry.is_set():
            time.sleep(0.05)
        for proc in groups:
            if proc.group_alive():
                proc.kill()

    def _signals_deferred(self) -> _DeferSignals:
        return _DeferSignals(self._hurry)


class _DeferSignals:
    """Holds SIGINT/SIGTERM/SIGHUP off while the launcher must not be interrupted (main thread only).

    While stopping ranks, such a signal cuts the grace period short (a second Ctrl-C means "kill
    them now"). With ``redeliver``, signals that arrived are delivered to the previous handlers on
    exit (so a Ctrl-C during start-up still interrupts, just not half-way through a fork).
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self, hurry: threading.Event, redeliver: bool = False) -> None:
        self._hurry = hurry
        self._redeliver = redeliver
        self._previous: dict[int, Callable[[int, FrameType | None], Any] | int | None] = {}
        self._received: list[int] = []

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in self.SIGNALS:
            with contextlib.suppress(ValueError, OSError):
                self._previous[signum] = signal.signal(signum, self._handler)

    def _handler(self, signum: int, frame: object) -> None:
        self._hurry.set()
        self._received.append(signum)

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            if handler is not None:  # None: a handler not installed from Python, which cannot be put back
                signal.signal(signum, handler)
        self._previous.clear()
        if self._redeliver and self._received:
            self._hurry.clear()
            signal.raise_signal(self._received[0])
