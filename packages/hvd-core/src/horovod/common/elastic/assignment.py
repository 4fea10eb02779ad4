"""The worker's side of forming a world: asking the driver for a place in the next one.

Called by ``init()`` (:mod:`horovod.common.lifecycle`) in a worker of an elastic job, in place of
reading a rank from the environment. See :mod:`horovod.common.elastic.protocol` for the exchange.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import sys
import threading
import time
from collections.abc import Mapping

from horovod.common.config import failure_report_key
from horovod.common.elastic import protocol
from horovod.common.exceptions import HorovodInternalError
from horovod.common.registry import RendezvousStore
from horovod.common.world import Launch, Topology

_log = logging.getLogger("horovod.elastic")

_lock = threading.Lock()
_requests = itertools.count()
_current: protocol.Assignment | None = None


def current() -> protocol.Assignment | None:
    """The assignment of the world this process last joined; None before its first."""
    return _current


#: Public name of :func:`current` (``horovod.common.elastic.last_assignment``): the place a worker
#: had in the last world it joined (rank, size...), also after ``shutdown()``.
last_assignment = current


def request_world(store: RendezvousStore, env: Mapping[str, str]) -> protocol.Assignment:
    """Asks the driver for a place in the next world and waits for it (``HOROVOD_ELASTIC_TIMEOUT``).

    Exits the process (status 0) when the driver answers that this worker must leave the job.
    """
    global _current
    job_key = env.get("HOROVOD_JOB_KEY", "job")
    worker = env[protocol.WORKER_ID]
    timeout_s = protocol.elastic_timeout_s(env)
    with _lock:
        seq = next(_requests)
        last = _current.generation if _current is not None else -1
    store.set(protocol.request_key(job_key, worker), protocol.WorldRequest(seq, last).encode())
    value = store.get(protocol.assignment_key(job_key, worker, seq), timeout_s)
    if value is None:
        raise HorovodInternalError(
            f"elastic worker {worker}: no world was formed within {timeout_s:g} s ({protocol.ELASTIC_TIMEOUT}); "
            "the driver is gone or too few workers are left"
        )
    assignment = protocol.Assignment.decode(value)
    if assignment.stop:
        # The driver's decision, not a failure: leave quietly, with success.
        print(f"horovod: elastic worker {worker} leaves the job: {assignment.stop}", file=sys.stderr, flush=True)
        raise SystemExit(0)
    with _lock:
        _current = assignment
    _log.debug(
        "worker %s joins world %d as rank %d of %d", worker, assignment.generation, assignment.rank, assignment.size
    )
    return assignment


class WorldStore:
    """The store an elastic world's engine connects through.

    A wait for a peer's key (its address, as the world forms) ends early, with HorovodInternalError,
    once the driver reports a member of this world lost (``failure_report_key``): the peer will
    never write it, and waiting for the backend's timeout (30 s) would only delay the next world.
    """

    #: Seconds between looks at the loss report while waiting for a key.
    SLICE_S = 0.5

    def __init__(self, store: RendezvousStore, env: Mapping[str, str]) -> None:
        self._store = store
        self._lost_key = failure_report_key(env.get("HOROVOD_JOB_KEY", "job"))

    def set(self, key: str, value: bytes) -> None:
        self._store.set(key, value)

    def get(self, key: str, timeout: float) -> bytes | None:
        if key == self._lost_key:
            return self._store.get(key, timeout)
        deadline = time.monotonic() + timeout
        while True:
            value = self._store.get(key, max(0.0, min(self.SLICE_S, deadline - time.monotonic())))
            if value is not None:
                return value
            lost = self._store.get(self._lost_key, 0.0)
            if lost:
                raise HorovodInternalError(f"a worker of this world was lost: {lost.decode('utf-8', 'replace')}")
            if time.monotonic() >= deadline:
                return None


def launch(store: RendezvousStore, env: Mapping[str, str]) -> Launch:
    """The launch of the next world this worker joins: its topology, and store keys of its own."""
    a = request_world(store, env)
    world_key = protocol.world_job_key(env.get("HOROVOD_JOB_KEY", "job"), a.generation)
    world_env = {**env, "HOROVOD_JOB_KEY": world_key, "HOROVOD_HOSTNAME": a.hostname or env.get("HOROVOD_HOSTNAME", "")}
    topology = Topology(a.rank, a.size, a.local_rank, a.local_size, a.cross_rank, a.cross_size)
    return dataclasses.replace(Launch(topology=topology, env=world_env, job_key=world_key), generation=a.generation)
