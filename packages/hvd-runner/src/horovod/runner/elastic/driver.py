"""The elastic driver: keeps workers running on the hosts discovery finds, and forms a new world
whenever the current one breaks or the hosts change.

Everything the driver decides happens on one thread (:meth:`ElasticDriver.run`), from a queue of
events: a worker asking for a place in the next world, a worker's process ending, what a worker
reported as it failed; discovery runs on the same thread every ``discovery_interval_s``. So the
state below needs no locks, and every wait has a deadline:

- a new world forms once every worker the driver counts on has asked to join; the clock starts
  when the current world breaks (a member asks again, or dies). A worker that has not asked within
  ``--elastic-timeout`` is killed (counted as a failure of its host);
- with fewer than ``--min-np`` workers for ``--elastic-timeout``, or more resets than
  ``--reset-limit``, the job ends, non-zero, saying why.

Failures: a worker that fails is replaced on its host at the next world; a host whose workers fail
a second time is blacklisted (:mod:`.host_manager`), and its remaining workers leave the job,
unless it is the only host left (blacklisting it would end the job).

Ranks: hosts holding workers of the previous world come first (oldest first), and on each host
those workers come before new ones, so that rank 0, from which every new world synchronises its
state, always holds the last commit when any worker does.
"""

from __future__ import annotations

import dataclasses
import queue
import signal
import time
from collections.abc import Callable
from typing import Protocol

from horovod.common.plugin_api import elastic_protocol as protocol
from horovod.common.plugin_api import failure_report_key
from horovod.runner.elastic.discovery import DiscoveryError, FixedHosts, HostDiscovery
from horovod.runner.elastic.host_manager import HostManager, HostUpdateResult
from horovod.runner.hosts import Host, place_ranks
from horovod.runner.job_report import ElasticHistory
from horovod.runner.local import RankExit

#: Failures of a host's workers (incidents, see _worker_exited) after which the host is blacklisted;
#: the workers lost in the first are replaced in place.
FAILURES_BEFORE_BLACKLIST = 2
#: Seconds between SIGTERM and SIGKILL for a worker the driver stops.
STOP_GRACE_S = 3.0
#: Seconds a worker the next world waits for may stay stopped (SIGSTOP) before it is killed.
FROZEN_GRACE_S = 5.0
#: Seconds a worker told to leave (or whose world is over) gets to exit by itself before SIGTERM.
LEAVE_GRACE_S = 10.0


class WorkerProcess(Protocol):
    """What the driver needs of a worker's process: horovodrun's :class:`RankProcess` (here or over
    ssh), or another launcher's (a Ray actor). Its end is reported as a :class:`WorkerExited` event."""

    @property
    def pid(self) -> int: ...

    @property
    def host(self) -> str | None: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...

    def stopped(self) -> bool: ...


@dataclasses.dataclass
class Worker:
    id: int
    host: str
    slot: int
    proc: WorkerProcess
    #: The last world it joined (-1: none yet).
    generation: int = -1
    #: The sequence number of its unanswered request for a place in the next world.
    pending: int | None = None
    #: Why it is being removed from the job ("" while it belongs).
    leaving: str = ""
    exit: RankExit | None = None
    #: When the driver sent it SIGTERM (it gets SIGKILL STOP_GRACE_S later).
    terminated_at: float | None = None
    #: What it reported as it began to fail.
    report: str = ""
    started_at: float = 0.0
    leaving_at: float = 0.0
    #: When it was first seen stopped (SIGSTOP) while a new world waited for it.
    stopped_since: float | None = None

    @property
    def alive(self) -> bool:
        return self.exit is None

    @property
    def name(self) -> str:
        return f"worker {self.id} (on {self.host}, slot {self.slot})"


class JobEnded(Exception):
    """The driver decided the job is over; ``code`` is horovodrun's exit status."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclasses.dataclass(frozen=True)
class DriverSettings:
    min_np: int
    max_np: int | None
    #: Workers to wait for before the first world (-np; default min_np).
    initial_np: int
    elastic_timeout_s: float
    reset_limit: int | None
    discovery_interval_s: float = 1.0


@dataclasses.dataclass(frozen=True)
class WorkerAsked:
    """A worker asked for a place in the next world."""

    worker_id: int
    request: protocol.WorldRequest


@dataclasses.dataclass(frozen=True)
class WorkerExited:
    worker_id: int
    returncode: int
    #: When the launcher saw it end (time.monotonic()).
    ended: float


@dataclasses.dataclass(frozen=True)
class WorkerReported:
    """What a worker reported as it began to fail (its uncaught exception)."""

    worker_id: int
    reason: str


Event = WorkerAsked | WorkerExited | WorkerReported

#: Starts worker ``id`` in ``slot`` of ``host``; returns its process (output already attached).
WorkerStarter = Callable[[int, str, int], WorkerProcess]


class ElasticDriver:
    def __init__(
        self,
        settings: DriverSettings,
        discovery: HostDiscovery,
        host_manager: HostManager,
        *,
        job_key: str,
        start_worker: WorkerStarter,
        publish: Callable[[str, bytes], None],
        log: Callable[[str], None],
        check_host: Callable[[str], str | None] = lambda host: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._discovery = discovery
        self._hosts = host_manager
        self._job_key = job_key
        self._start_worker = start_worker
        self._publish = publish
        self._log = log
        self._check_host = check_host  # None when a new host can run workers, else why not
        self._clock = clock
        #: Events from other threads (the server's, the process waiters').
        self.events: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self._workers: dict[int, Worker] = {}
        self._next_id = 0
        self._host_failures: dict[str, set[tuple[str, int]]] = {}  # host -> its strikes
        self._unusable: set[str] = set()  # hosts whose check failed: never started on again
        self._generation = -1
        self._members: list[int] = []  # worker ids of the current world, by rank
        self._broken_since: float | None = None  # when the current world broke (None: it runs)
        self._resets = 0
        self._updates = 0
        self._last_update_ts = 0.0
        self._finished: list[int] = []  # members that ended training successfully
        self._announced = False  # whether the running world was told of new workers ready to join
        #: Why the job failed, once run() returned a failure.
        self.failure: str | None = None

    # --- the loop -------------------------------------------------------------------------------

    def run(self) -> int:
        """Runs the job to its end; returns horovodrun's exit status (workers are all stopped)."""
        try:
            try:
                self._start()
                return self._loop()
            except JobEnded as ended:
                self._log(str(ended))
                self._stop_all(ended.code == 0)
                self.failure = None if ended.code == 0 else str(ended)
                return ended.code
        except BaseException:
            self._stop_all(False)
            raise

    def _start(self) -> None:
        deadline = self._clock() + self._settings.elastic_timeout_s
        waiting_said = False
        while True:
            self._discover(fatal=True)
            slots = sum(self._hosts.current_hosts.values())
            if slots >= self._settings.initial_np:
                break
            if not waiting_said:
                self._log(
                    f"elastic: {slots} slot(s) found, waiting for the {self._settings.initial_np} needed to start "
                    f"(up to --elastic-timeout {self._settings.elastic_timeout_s:g} s)"
                )
                waiting_said = True
            if self._clock() > deadline:
                raise JobEnded(
                    1,
                    f"job failed: only {slots} slot(s) found, fewer than the {self._settings.initial_np} needed to "
                    f"start, for --elastic-timeout {self._settings.elastic_timeout_s:g} s",
                )
            time.sleep(self._settings.discovery_interval_s)
        self._broken_since = self._clock()  # no world yet: the first one must form in time
        self._fill_slots()

    def _loop(self) -> int:
        next_discovery = self._clock() + self._settings.discovery_interval_s
        while True:
            try:
                event = self.events.get(timeout=max(0.0, min(0.2, next_discovery - self._clock())))
            except queue.Empty:
                event = None
            while event is not None:  # everything queued, before deciding anything
                self._handle(event)
                try:
                    event = self.events.get_nowait()
                except queue.Empty:
                    event = None
            if self._clock() >= next_discovery:
                self._discover(fatal=False)
                next_discovery = self._clock() + self._settings.discovery_interval_s
            code = self._step()
            if code is not None:
                return code

    # --- events ---------------------------------------------------------------------------------

    def _handle(self, event: Event) -> None:
        worker = self._workers.get(event.worker_id)
        if worker is None:
            return
        if isinstance(event, WorkerAsked):
            worker.pending = event.request.seq
            if worker.leaving or self._finished:
                self._reply_stop(worker, worker.leaving or self._finished_reason())
            elif worker.generation == self._generation and worker.generation >= 0:
                self._world_broke(f"{worker.name} asked for a new world")
        elif isinstance(event, WorkerExited):
            self._worker_exited(worker, event.returncode, event.ended)
        else:
            worker.report = event.reason

    def _worker_exited(self, worker: Worker, returncode: int, ended: float) -> None:
        worker.exit = RankExit(self._rank_of(worker), worker.proc.pid, returncode, ended, worker.proc.host)
        worker.pending = None
        member = worker.id in self._members
        if returncode == 0:
            if member and not worker.leaving:
                self._finished.append(worker.id)
            return
        how = worker.report or f"its process {worker.exit.describe()}"
        if member:
            # Its peers' engines wait briefly for this line to say whom they lost (and a world still
            # forming gives up on it at once): published for a leaving member too.
            rank = self._members.index(worker.id)
            line = f"rank {rank} (worker {worker.id}, on {worker.host}): {how}"
            self._publish(failure_report_key(protocol.world_job_key(self._job_key, self._generation)), line.encode())
        if worker.leaving or (self._finished and not member):
            return  # being removed anyway, or a newcomer stopped at the job's end
        self._log(f"elastic: {worker.name} failed: {how}")
        if self._finished:
            return  # the job is ending: its status is decided once every member has ended
        if member:
            self._world_broke(f"{worker.name} failed")
        # One incident counts once: workers of one world failing together (a host losing several to
        # one cause, or one dying while the world recovers from another) are one strike against
        # their host; a new worker that fails before joining any world is a strike of its own.
        incident = ("world", self._generation) if worker.generation >= 0 else ("worker", worker.id)
        strikes = self._host_failures.setdefault(worker.host, set())
        strikes.add(incident)
        if len(strikes) >= FAILURES_BEFORE_BLACKLIST:
            strikes.clear()
            if not any(h != worker.host for h in self._hosts.current_hosts):
                # Blacklisting it would end the job: it keeps its workers, whose replacements try again.
                self._log(f"elastic: host {worker.host}: its workers failed again; it is the last host, so it stays")
                self._fill_slots()
                return
            delay = self._hosts.blacklist(worker.host)
            when = "for good" if delay == float("inf") else f"for {delay:.0f} s"
            self._log(
                f"elastic: host {worker.host} blacklisted {when}: its workers failed {FAILURES_BEFORE_BLACKLIST} times"
            )
            self._remove_workers_off_hosts()
        self._fill_slots()  # a replacement, on this host if it is still usable, joins the next world it can

    def _world_broke(self, why: str) -> None:
        if self._broken_since is None and self._generation >= 0:
            self._broken_since = self._clock()
            self._log(f"elastic: world {self._generation} is over ({why}); forming the next one")

    # --- hosts ------------------------------------------------------------------------------

    def _discover(self, fatal: bool) -> None:
        try:
            found = self._discovery.find_available_hosts_and_slots()
        except DiscoveryError as error:
            if fatal:
                raise JobEnded(1, f"job failed: {error}") from None
            self._log(f"elastic: {error}; keeping the hosts found before")
            return
        found = {h: s for h, s in found.items() if h not in self._unusable}
        before = self._hosts.current_hosts
        result = self._hosts.update(found)
        if result == HostUpdateResult.no_update:
            return
        after = self._hosts.current_hosts
        added = [f"{h}:{s}" for h, s in after.items() if before.get(h, 0) < s]
        removed = [f"{h}:{before[h]}" for h in before if after.get(h, 0) < before[h]]
        self._log(
            "elastic: hosts changed:"
            + (f" added {', '.join(added)}" if added else "")
            + (f" removed {', '.join(removed)}" if removed else "")
        )
        leaving = self._remove_workers_off_hosts()
        if any(w.id in self._members for w in leaving) and self._generation >= 0 and self._broken_since is None:
            # Members on removed hosts leave at the world's next commit. (New hosts are announced
            # once their workers are ready to join: _announce_newcomers.)
            self._publish_update(HostUpdateResult.removed)
        if not self._finished:
            self._fill_slots()

    def _publish_update(self, result: HostUpdateResult) -> None:
        self._updates += 1
        # Strictly increasing, even if the wall clock steps back: workers compare these.
        self._last_update_ts = max(time.time(), self._last_update_ts + 1e-6)
        update = protocol.HostsUpdate(self._last_update_ts, int(result))
        self._publish(protocol.hosts_update_key(self._job_key, self._updates), update.encode())

    def _remove_workers_off_hosts(self) -> list[Worker]:
        """Marks the workers that no longer fit the usable hosts as leaving; returns them."""
        leaving: list[Worker] = []
        hosts = self._hosts.current_hosts
        by_host: dict[str, list[Worker]] = {}
        for w in self._live():
            by_host.setdefault(w.host, []).append(w)
        for host, workers in by_host.items():
            slots = hosts.get(host, 0)
            # On a host that shrank, workers of the current world stay first, then the oldest.
            workers.sort(key=lambda w: (w.id not in self._members, w.id))
            for w in workers[slots:]:
                why = "its host was removed" if slots == 0 else f"host {host} now has {slots} slot(s)"
                if self._hosts.is_blacklisted(host):
                    why = f"host {host} was blacklisted"
                self._leave(w, why)
                leaving.append(w)
        return leaving

    def _fill_slots(self) -> None:
        """Starts workers on the usable slots nobody occupies, up to --max-np."""
        live = self._live()
        room = (self._settings.max_np or 1 << 30) - len(live)
        for host, slots in self._hosts.current_hosts.items():
            if room <= 0:
                break
            used = {w.slot for w in live if w.host == host}
            free = [s for s in range(slots) if s not in used][:room]
            if not free:
                continue
            problem = self._check_host(host)
            if problem is not None:
                self._log(f"elastic: cannot use host {host}: {problem}")
                self._unusable.add(host)
                self._hosts.update({h: s for h, s in self._hosts.current_hosts.items() if h != host})
                continue
            for slot in free:
                self._launch(host, slot)
                room -= 1

    def _launch(self, host: str, slot: int) -> None:
        worker_id = self._next_id
        self._next_id += 1
        proc = self._start_worker(worker_id, host, slot)
        self._workers[worker_id] = Worker(worker_id, host, slot, proc, started_at=self._clock())

    # --- forming worlds -------------------------------------------------------------------------

    def _live(self) -> list[Worker]:
        return [w for w in self._workers.values() if w.alive and not w.leaving]

    def _live_members(self) -> list[Worker]:
        """The current world's members that are still in it."""
        return [w for w in map(self._workers.__getitem__, self._members) if w.alive and not w.leaving]

    def _step(self) -> int | None:
        """Decides what the events so far call for; returns the exit status once the job is over."""
        now = self._clock()
        self._escalate_stops(now)
        if self._finished:
            return self._finishing()
        self._stop_stragglers(now)
        if self._broken_since is None and self._generation >= 0 and not self._live_members():
            # Every member left (their hosts were all removed) or exited: no commit will come for
            # newcomers to join at, so they form the next world, from their own state.
            self._world_broke("every member has left")
        if self._broken_since is None:
            self._announce_newcomers()
            return None
        live = self._live()
        # The first world waits for every worker started; later ones for the workers of earlier
        # worlds (they hold the state). A new worker that is not ready yet joins the world after.
        required = [w for w in live if w.generation >= 0 or self._generation < 0]
        silent = [w for w in required if w.pending is None]
        elapsed = now - self._broken_since
        if silent:
            self._stop_frozen(silent, now)
            if elapsed > self._settings.elastic_timeout_s:
                for w in silent:
                    self._log(
                        f"elastic: {w.name} did not ask to join a new world within --elastic-timeout "
                        f"{self._settings.elastic_timeout_s:g} s; stopping it"
                    )
                    self._terminate(w)
            return None
        joining = [w for w in live if w.pending is not None]
        if len(joining) < self._settings.min_np:
            hopeless = self._no_host_can_come()
            if elapsed > self._settings.elastic_timeout_s or hopeless:
                how_long = (
                    "and no host can come back"
                    if hopeless
                    else f"for --elastic-timeout {self._settings.elastic_timeout_s:g} s"
                )
                raise JobEnded(
                    1,
                    f"job failed: {len(joining)} worker(s) left, fewer than --min-np {self._settings.min_np}, "
                    f"{how_long} (hosts now: {self._describe_hosts()})",
                )
            return None
        if self._generation >= 0:
            limit = self._settings.reset_limit
            if limit is not None and self._resets >= limit:
                raise JobEnded(
                    1, f"job failed: the job was reset {self._resets} time(s), reaching --reset-limit {limit}"
                )
            self._resets += 1
        self._form(joining, elapsed)
        return None

    def _stop_frozen(self, silent: list[Worker], now: float) -> None:
        """Kills a worker the new world waits for that stays stopped (SIGSTOP, a debugger): it cannot
        ask to join, and only --elastic-timeout would end the wait. (Only workers of this machine
        can be seen so.)"""
        for w in silent:
            if not w.proc.stopped():
                w.stopped_since = None
            elif w.stopped_since is None:
                w.stopped_since = now
            elif now - w.stopped_since > FROZEN_GRACE_S and w.terminated_at is None:
                self._log(f"elastic: {w.name} is stopped (SIGSTOP, or a debugger) and a new world waits: killed")
                w.proc.kill()
                w.terminated_at = float("inf")

    def _no_host_can_come(self) -> bool:
        """Whether waiting is pointless: fixed hosts (-H), too few slots, every other host out for good."""
        if not isinstance(self._discovery, FixedHosts):
            return False  # discovery may find hosts any time
        slots = sum(self._hosts.current_hosts.values())
        return slots < self._settings.min_np and not self._hosts.any_coming_back()

    def _announce_newcomers(self) -> None:
        """New workers ready to join a running world: tell the world, which grows at its next commit."""
        if self._announced or self._generation < 0:
            return
        ready = [w.id for w in self._live() if w.generation < 0 and w.pending is not None]
        if ready:
            self._publish_update(HostUpdateResult.added)
            self._announced = True
            self._log(
                f"elastic: worker(s) {', '.join(map(str, ready))} ready to join; world {self._generation} "
                "grows at its next commit"
            )

    def _stop_stragglers(self, now: float) -> None:
        """Stops new workers that never asked to join, and leaving workers that no world waits for."""
        limit = self._settings.elastic_timeout_s
        for w in self._workers.values():
            if not w.alive or w.terminated_at is not None or w.pending is not None:
                continue
            if not w.leaving and w.generation < 0 and now - w.started_at > limit:
                self._log(
                    f"elastic: {w.name} did not ask to join a world within --elastic-timeout {limit:g} s; stopping it"
                )
                self._terminate(w)
            elif w.leaving and (w.id not in self._members or self._broken_since is not None):
                since = max(w.leaving_at, self._broken_since or 0.0)
                if now - since > LEAVE_GRACE_S:
                    self._terminate(w)

    def _form(self, live: list[Worker], elapsed: float) -> None:
        veterans = {w.id for w in live if w.generation >= 0}
        order: dict[str, int] = {h: i for i, h in enumerate(self._hosts.current_hosts)}
        by_host: dict[str, list[Worker]] = {}
        for w in live:
            by_host.setdefault(w.host, []).append(w)
        hosts = sorted(
            by_host,
            key=lambda h: (not any(w.id in veterans for w in by_host[h]), order.get(h, len(order))),
        )
        ordered: list[Worker] = []
        for host in hosts:
            ordered.extend(sorted(by_host[host], key=lambda w: (w.id not in veterans, w.slot)))
        placements = place_ranks([Host(h, len(by_host[h])) for h in hosts], len(ordered))
        self._generation += 1
        self._members = [w.id for w in ordered]
        for w, p in zip(ordered, placements, strict=True):
            assignment = protocol.Assignment(
                generation=self._generation,
                rank=p.rank,
                size=p.size,
                local_rank=p.local_rank,
                local_size=p.local_size,
                cross_rank=p.cross_rank,
                cross_size=p.cross_size,
                hostname=w.host,
                updates_seen=self._updates,
                updates_timestamp=self._last_update_ts,
            )
            assert w.pending is not None
            self._publish(protocol.assignment_key(self._job_key, str(w.id), w.pending), assignment.encode())
            w.pending = None
            w.generation = self._generation
        self._broken_since = None
        self._announced = False
        layout = ", ".join(f"{h}:{len(by_host[h])}" for h in hosts)
        self._log(f"elastic: world {self._generation} formed in {elapsed:.1f} s: {len(ordered)} worker(s) on {layout}")

    # --- leaving and ending ---------------------------------------------------------------------

    def _leave(self, worker: Worker, why: str) -> None:
        if worker.leaving:
            return
        worker.leaving = why
        worker.leaving_at = self._clock()
        self._log(f"elastic: {worker.name} leaves the job: {why}")
        if worker.pending is not None:
            self._reply_stop(worker, why)
        # Else it is told when it next asks: a member of the running world hears of the change at its
        # next commit; one whose world is over asks within moments (_stop_stragglers sees to the rest).

    def _reply_stop(self, worker: Worker, why: str) -> None:
        assert worker.pending is not None
        stop = protocol.Assignment(generation=self._generation, stop=why)
        self._publish(protocol.assignment_key(self._job_key, str(worker.id), worker.pending), stop.encode())
        worker.pending = None
        if not worker.leaving:
            worker.leaving = why
            worker.leaving_at = self._clock()

    def _finished_reason(self) -> str:
        return f"the job is ending: worker {self._finished[0]} finished training"

    def _finishing(self) -> int | None:
        """Once a member finished, the others finish too; newcomers are sent away."""
        for w in self._workers.values():
            if w.alive and w.id not in self._members and not w.leaving:
                self._leave(w, self._finished_reason())
        if any(self._workers[i].alive for i in self._members):
            return None
        failed = [self._workers[i] for i in self._members if self._workers[i].exit.returncode != 0]  # type: ignore[union-attr]
        if failed:
            first = min(failed, key=lambda w: w.exit.ended)  # type: ignore[union-attr]
            assert first.exit is not None
            raise JobEnded(first.exit.exit_code, f"job failed: {first.name} {first.exit.describe()}")
        raise JobEnded(0, f"elastic: job done: {len(self._members)} worker(s) of world {self._generation} finished")

    def _terminate(self, worker: Worker) -> None:
        if worker.alive and worker.terminated_at is None:
            worker.terminated_at = self._clock()
            worker.proc.terminate()

    def _escalate_stops(self, now: float) -> None:
        for w in self._workers.values():
            if w.alive and w.terminated_at is not None and now - w.terminated_at > STOP_GRACE_S:
                w.proc.kill()
                w.terminated_at = float("inf")  # killed: not again

    def _stop_all(self, quietly: bool) -> None:
        """Stops every worker still running (SIGTERM, SIGKILL after the grace) and waits for them."""
        for w in self._workers.values():
            if w.pending is not None:
                self._reply_stop(w, "the job is ending")
            self._terminate(w)
        deadline = self._clock() + STOP_GRACE_S
        while any(w.alive for w in self._workers.values()):
            if self._clock() > deadline:
                for w in self._workers.values():
                    if w.alive and w.terminated_at != float("inf"):
                        w.proc.kill()
                        w.terminated_at = float("inf")
                deadline = float("inf")
            try:
                event = self.events.get(timeout=0.05)
            except queue.Empty:
                continue
            if isinstance(event, WorkerExited) and event.worker_id in self._workers:
                worker = self._workers[event.worker_id]
                worker.exit = RankExit(self._rank_of(worker), worker.proc.pid, event.returncode, event.ended)
        if not quietly:
            stopped = [w for w in self._workers.values() if w.exit is not None and w.exit.returncode == -signal.SIGTERM]
            if stopped:
                self._log(f"elastic: stopped {len(stopped)} worker(s)")

    # --- the job-end report ----------------------------------------------------------------------

    def last_world(self) -> tuple[ElasticHistory, dict[int, str]]:
        """The last world formed (its ranks' workers and hosts, the resets before it), and how each
        of its ranks that failed ended: for the job-end report, once run() returned."""
        history = ElasticHistory(
            generation=self._generation,
            resets=self._resets,
            workers=[str(i) for i in self._members],
            hosts=[self._workers[i].host for i in self._members],
        )
        ended = {}
        for rank, worker_id in enumerate(self._members):
            worker = self._workers[worker_id]
            if worker.exit is not None and worker.exit.returncode != 0:
                ended[rank] = worker.exit.describe() + (f" ({worker.report})" if worker.report else "")
        return history, ended

    # --- helpers ------------------------------------------------------------------------------

    def _rank_of(self, worker: Worker) -> int:
        return self._members.index(worker.id) if worker.id in self._members else -1

    def _describe_hosts(self) -> str:
        hosts = ", ".join(f"{h}:{s}" for h, s in self._hosts.current_hosts.items()) or "none"
        blacklisted = self._hosts.blacklisted_hosts()
        return hosts + (f"; blacklisted: {', '.join(blacklisted)}" if blacklisted else "")
