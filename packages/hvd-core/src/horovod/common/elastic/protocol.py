"""The elastic contract between a launcher's driver and its workers.

A worker of an elastic job is started without a rank: its environment says it is elastic
(``HOROVOD_ELASTIC=1``) and names it (``HOROVOD_ELASTIC_WORKER_ID``, stable for the process's life).
Each ``init()`` asks the driver for a place in the next world through the job's rendezvous store:

1. the worker sets :func:`request_key` to a :class:`WorldRequest` (a sequence number of its own);
2. the driver, once every worker it expects has asked (or is gone), sets :func:`assignment_key`
   for that sequence number to an :class:`Assignment`: the world's generation and the worker's
   place in it, or the reason it must leave the job;
3. the world's engine keys its store entries under :func:`world_job_key` (one per generation), so
   that a world never reads what an earlier one left behind.

While a world runs, the driver numbers the changes it sees in the set of hosts and publishes each
as a :class:`HostsUpdate` under :func:`hosts_update_key` (1, 2, ...); workers watch for the next
number (``horovod.common.elastic.notifications``) and stop at their next ``commit()``.

Every message is a small JSON object; nothing received is unpickled. Launchers (horovodrun's
driver, Spark's, Ray's) import this module through :mod:`horovod.common.plugin_api`.

.. versionadded:: 0.2
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from typing import Any, TypeVar

#: "1" in a worker of an elastic job.
ELASTIC = "HOROVOD_ELASTIC"
#: The driver's name for this worker process (stable across the worlds it joins).
WORKER_ID = "HOROVOD_ELASTIC_WORKER_ID"
#: Seconds a worker waits for its place in a new world (Horovod's variable; ``--elastic-timeout``).
ELASTIC_TIMEOUT = "HOROVOD_ELASTIC_TIMEOUT"
DEFAULT_ELASTIC_TIMEOUT_S = 600.0


class HostUpdateResult(enum.IntFlag):
    """What changed in the set of hosts (Horovod's flags): hosts were removed, added, or both."""

    no_update = 0
    removed = 1
    added = 2
    mixed = 3


def is_elastic(env: Mapping[str, str]) -> bool:
    return env.get(ELASTIC, "").strip() == "1" and bool(env.get(WORKER_ID, "").strip())


def elastic_timeout_s(env: Mapping[str, str]) -> float:
    raw = env.get(ELASTIC_TIMEOUT, "").strip()
    if not raw:
        return DEFAULT_ELASTIC_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{ELASTIC_TIMEOUT}={raw!r} is not a number of seconds") from None
    if value <= 0:
        raise ValueError(f"{ELASTIC_TIMEOUT}={raw!r} must be positive")
    return value


def request_key(job_key: str, worker: str) -> str:
    return f"{job_key}/elastic/request/{worker}"


def request_prefix(job_key: str) -> str:
    """What every request key starts with (the driver watches it); the worker id follows."""
    return f"{job_key}/elastic/request/"


def assignment_key(job_key: str, worker: str, seq: int) -> str:
    return f"{job_key}/elastic/assign/{worker}/{seq}"


def hosts_update_key(job_key: str, number: int) -> str:
    return f"{job_key}/elastic/hosts/{number}"


def world_job_key(job_key: str, generation: int) -> str:
    """The job key of one generation's world: its engine's store keys and its loss reports."""
    return f"{job_key}/gen{generation}"


_M = TypeVar("_M", bound="_Message")


class _Message:
    """A frozen dataclass sent as a JSON object; unknown fields from a newer peer are ignored."""

    def encode(self) -> bytes:
        return json.dumps(dataclasses.asdict(self)).encode()  # type: ignore[call-overload]

    @classmethod
    def decode(cls: type[_M], data: bytes) -> _M:
        try:
            raw: Any = json.loads(data.decode("utf-8"))
            fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
            return cls(**{k: v for k, v in raw.items() if k in fields})
        except (ValueError, TypeError, AttributeError) as error:
            raise ValueError(f"malformed elastic {cls.__name__}: {data[:200]!r}") from error


@dataclasses.dataclass(frozen=True)
class WorldRequest(_Message):
    """A worker asks for a place in the next world."""

    #: The worker's own count of requests (0, 1, ...): the assignment answers this number.
    seq: int
    #: The last generation it was part of; -1 for none.
    generation: int = -1


@dataclasses.dataclass(frozen=True)
class Assignment(_Message):
    """The driver's answer: the worker's place in a world, or why it must leave the job."""

    generation: int
    rank: int = -1
    size: int = 0
    local_rank: int = 0
    local_size: int = 1
    cross_rank: int = 0
    cross_size: int = 1
    hostname: str = ""
    #: How many host updates were published before this world formed (the worker watches for the next).
    updates_seen: int = 0
    #: The timestamp of the last of those (0 for none): an update a worker hears of later, but that is
    #: no newer, is already reflected in this world and interrupts nothing.
    updates_timestamp: float = 0.0
    #: Non-empty: the worker is not in this world and must exit (its host was removed, the job ended...).
    stop: str = ""


@dataclasses.dataclass(frozen=True)
class HostsUpdate(_Message):
    """The set of hosts changed (published by the driver, numbered from 1)."""

    #: The driver's clock (time.time()) when it saw the change; workers compare these.
    timestamp: float
    #: A :class:`HostUpdateResult` value.
    result: int
