"""Reading the job's topology and the ``HOROVOD_*`` knobs, with clear errors for bad values.

Everything is read when ``init()`` runs, from the process environment merged with the overrides
of the current launch (the test kit runs several ranks as threads of one process, each with its
own overrides, since ``os.environ`` is shared).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, Mapping

_log = logging.getLogger("horovod")

LOG_LEVELS = {"trace": 0, "debug": 1, "info": 2, "warning": 3, "error": 4, "fatal": 5}

# Knobs of Horovod that belong to features this release does not have yet: accepted, but a
# warning says they have no effect, so nobody believes they are tuning something.
_NOT_YET = (
    "HOROVOD_AUTOTUNE",
    "HOROVOD_HIERARCHICAL_ALLREDUCE",
    "HOROVOD_HIERARCHICAL_ALLGATHER",
    "HOROVOD_ADASUM_MPI_CHUNK_SIZE",
    "HOROVOD_THREAD_AFFINITY",
    "HOROVOD_DISABLE_GROUP_FUSION",
)


@dataclasses.dataclass(frozen=True)
class Topology:
    """Where this process sits in the job, as the launcher (or the test kit) describes it."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1
    cross_rank: int = 0
    cross_size: int = 1


@dataclasses.dataclass(frozen=True)
class Launch:
    """How init() connects: the topology, the knobs, and (in tests) a shared in-process store."""

    topology: Topology
    env: Mapping[str, str]
    #: A ready store object for the engine (test kit), or None to let init() choose.
    store: Any = None
    #: A key prefix unique to this job; init() appends the initialisation count.
    job_key: str = "job"
    #: The backend that connects this job when a plugin described it (:class:`ExternalWorld`);
    #: None for horovodrun's jobs and the test kit's.
    backend: str | None = None


@dataclasses.dataclass(frozen=True)
class ExternalWorld:
    """A job, or a world inside one, that a plugin describes because horovodrun did not start it:
    the ranks of ``mpirun -np 4 python train.py``, or the members of an mpi4py communicator given to
    ``init(comm=...)``. Answer of the hooks ``hvd_external_launch`` and ``hvd_init_world``.

    .. versionadded:: 0.2
    """

    #: This process's place in the job or world.
    topology: Topology
    #: The backend that must connect it. It connects its ranks by itself: the engine hands it an
    #: in-memory store, since no rendezvous server exists.
    backend: str
    #: Tells this world from other worlds of the same job in store keys (for a backend that keys its
    #: set-up by them); "" when the backend needs no store.
    name: str = ""


def _int(env: Mapping[str, str], key: str, default: int, minimum: int | None = None) -> int:
    raw = env.get(key)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{key}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ValueError(f"{key}={value} must be at least {minimum}")
    return value


def _float(env: Mapping[str, str], key: str, default: float, minimum: float = 0.0) -> float:
    raw = env.get(key)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{key}={raw!r} is not a number") from None
    if value < minimum:
        raise ValueError(f"{key}={value} must be at least {minimum}")
    return value


def _bool(env: Mapping[str, str], key: str, default: bool = False) -> bool:
    raw = env.get(key)
    if raw is None or raw.strip() == "":
        return default
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{key}={raw!r} is not a boolean (use 1 or 0)")


def topology_from_env(env: Mapping[str, str]) -> Topology:
    """The topology the launcher exported; a lone process without a launcher is rank 0 of 1."""
    size = _int(env, "HOROVOD_SIZE", 1, minimum=1)
    rank = _int(env, "HOROVOD_RANK", 0, minimum=0)
    if rank >= size:
        raise ValueError(f"HOROVOD_RANK={rank} is out of range for HOROVOD_SIZE={size}")
    local_size = _int(env, "HOROVOD_LOCAL_SIZE", size, minimum=1)
    local_rank = _int(env, "HOROVOD_LOCAL_RANK", rank % local_size, minimum=0)
    cross_size = _int(env, "HOROVOD_CROSS_SIZE", max(1, size // local_size), minimum=1)
    cross_rank = _int(env, "HOROVOD_CROSS_RANK", rank // local_size, minimum=0)
    return Topology(rank, size, local_rank, local_size, cross_rank, cross_size)


def launch_from_environment() -> Launch:
    """This process's job: horovodrun's ``HOROVOD_*`` variables, else what a plugin recognises
    (a job started by another launcher, e.g. mpirun), else a lone process (rank 0 of 1)."""
    env = dict(os.environ)
    launch = Launch(topology=topology_from_env(env), env=env, job_key=env.get("HOROVOD_JOB_KEY", "job"))
    if "HOROVOD_RANK" in env:  # horovodrun describes every job it starts; no plugin is asked
        return launch
    from horovod.common.plugins import get_plugin_manager  # here: plugins import this module

    external = get_plugin_manager().external_launch(env)
    if external is None:
        return launch
    return dataclasses.replace(launch, topology=external.topology, backend=external.backend)


def failure_report_key(job_key: str) -> str:
    """The store key under which a launcher describes the first rank its job lost (one line of
    text, or empty for none): the contract between launchers and the engine."""
    return f"{job_key}/lost"


def engine_config(core: Any, env: Mapping[str, str], *, rank: int, size: int, key_prefix: str) -> Any:
    """A ``_core.EngineConfig`` from the ``HOROVOD_*`` knobs, with Horovod's defaults."""
    config = core.EngineConfig()
    config.rank = rank
    config.size = size
    config.key_prefix = key_prefix
    config.fusion_threshold = _int(env, "HOROVOD_FUSION_THRESHOLD", 128 * 1024 * 1024, minimum=0)
    config.cycle_time_ms = _float(env, "HOROVOD_CYCLE_TIME", 1.0)
    config.cache_capacity = _int(env, "HOROVOD_CACHE_CAPACITY", 1024, minimum=0)
    # hvd's own knob: bytes of small cached allreduces each rank sends inside negotiation (0: never).
    config.inline_bytes = _int(env, "HOROVOD_NEGOTIATION_INLINE_BYTES", 1024, minimum=0)
    config.stall_check_enabled = not _bool(env, "HOROVOD_STALL_CHECK_DISABLE")
    config.stall_check_s = _float(env, "HOROVOD_STALL_CHECK_TIME_SECONDS", 60.0)
    config.stall_shutdown_s = _float(env, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", 0.0)
    timeline = env.get("HOROVOD_TIMELINE", "")
    config.timeline_path = "" if timeline in ("", "DYNAMIC") else timeline
    config.timeline_mark_cycles = _bool(env, "HOROVOD_TIMELINE_MARK_CYCLES")
    level = env.get("HOROVOD_LOG_LEVEL", "warning").strip().lower() or "warning"
    if level not in LOG_LEVELS:
        raise ValueError(f"HOROVOD_LOG_LEVEL={level!r} is not one of {', '.join(LOG_LEVELS)}")
    config.log_level = LOG_LEVELS[level]
    config.log_hide_time = _bool(env, "HOROVOD_LOG_HIDE_TIME")
    config.timeout_ms = int(_float(env, "HOROVOD_GLOO_TIMEOUT_SECONDS", 30.0, minimum=0.001) * 1000)
    config.dynamic_process_sets = _bool(env, "HOROVOD_DYNAMIC_PROCESS_SETS")
    # A launcher (horovodrun) describes a lost rank in the job's store; the engine adds that to the
    # error its peers raise, waiting up to this long for it to appear.
    job_key = env.get("HOROVOD_JOB_KEY", "").strip()
    config.failure_report_key = failure_report_key(job_key) if job_key else ""
    config.failure_report_wait_ms = int(_float(env, "HOROVOD_FAILURE_REPORT_WAIT_SECONDS", 3.0) * 1000)
    for key in _NOT_YET:
        if env.get(key, "").strip() not in ("", "0"):
            _log.warning("%s is set, but this release of hvd does not implement it yet; it has no effect", key)
    return config


def requested_backend(env: Mapping[str, str]) -> str | None:
    """The CPU backend the user asked for (HOROVOD_CPU_OPERATIONS, then HOROVOD_CONTROLLER)."""
    for key in ("HOROVOD_CPU_OPERATIONS", "HOROVOD_CONTROLLER"):
        value = env.get(key, "").strip().lower()
        if value:
            return value
    return None


