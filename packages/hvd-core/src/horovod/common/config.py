"""Reading the job's topology and the ``HOROVOD_*`` knobs, with clear errors for bad values.

Everything is read when ``init()`` runs, from the process environment merged with the overrides
of the current launch (the test kit runs several ranks as threads of one process, each with its
own overrides, since ``os.environ`` is shared).
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Mapping
from typing import Any, NamedTuple

from horovod.common.world import ExternalWorld, Launch, Topology

__all__ = [
    "INACTIVE_KNOBS",
    "LOG_LEVELS",
    "ExternalWorld",  # defined in horovod.common.world; importable from here as before
    "Launch",
    "Topology",
    "engine_config",
    "failure_report_key",
    "inactive_knobs_set",
    "requested_backend",
    "topology_from_env",
    "warn_inactive_knobs",
]

_log = logging.getLogger("horovod")

LOG_LEVELS = {"trace": 0, "debug": 1, "info": 2, "warning": 3, "error": 4, "fatal": 5}


class Inactive(NamedTuple):
    """Why a Horovod knob has no effect in hvd."""

    why: str
    #: A switch: only a true value asks for something (off is what hvd does anyway), so only it warns.
    switch: bool = False


_ONE_STREAM = "hvd queues a device's NCCL work on one stream of the engine's"

#: Horovod's knobs that hvd accepts but does not act on, with why: the one list of them. Each one
#: that is set is named in a single warning (by rank 0, once per process), so nobody believes they
#: are tuning something. A knob leaves this table when it is implemented, as
#: HOROVOD_HIERARCHICAL_ALLREDUCE did; a request hvd already satisfies (HOROVOD_DISABLE_NVTX_RANGES:
#: hvd marks no NVTX ranges) is not listed.
INACTIVE_KNOBS: dict[str, Inactive] = {
    "HOROVOD_TORUS_ALLREDUCE": Inactive(
        "hvd has no torus allreduce (HOROVOD_HIERARCHICAL_ALLREDUCE is implemented)",
        switch=True,
    ),
    "HOROVOD_ADASUM_MPI_CHUNK_SIZE": Inactive("hvd's Adasum moves each level's halves whole, on every backend"),
    "HOROVOD_CCL_BGT_AFFINITY": Inactive("hvd has no oneCCL backend (HOROVOD_THREAD_AFFINITY pins hvd's own thread)"),
    "HOROVOD_CCL_CACHE": Inactive("hvd has no oneCCL backend", switch=True),
    "HOROVOD_DISABLE_GROUP_FUSION": Inactive(
        "hvd does not implement keeping grouped operations out of fusion yet", switch=True
    ),
    "HOROVOD_NUM_NCCL_STREAMS": Inactive(_ONE_STREAM),
    "HOROVOD_BATCH_D2D_MEMCOPIES": Inactive(
        "hvd copies no GPU tensor into a fusion buffer: NCCL reduces a batch in place, as one group", switch=True
    ),
    "HOROVOD_ENABLE_ASYNC_COMPLETION": Inactive(
        "hvd always completes GPU operations asynchronously: with an event the caller's stream waits on",
        switch=True,
    ),
    "HOROVOD_ENABLE_XLA_OPS": Inactive("hvd's TensorFlow ops have no XLA implementation yet", switch=True),
}

_OFF = ("", "0", "false", "no", "off")
_warned: set[str] = set()
_warned_lock = threading.Lock()


def inactive_knobs_set(env: Mapping[str, str]) -> list[str]:
    """The knobs of :data:`INACTIVE_KNOBS` that ``env`` asks for, in the table's order."""
    asked = []
    for name, knob in INACTIVE_KNOBS.items():
        value = env.get(name, "").strip()
        if value and not (knob.switch and value.lower() in _OFF):
            asked.append(name)
    return asked


def warn_inactive_knobs(env: Mapping[str, str], *, rank: int) -> None:
    """Warns, naming it and saying why, for each knob ``env`` asks for that hvd does not act on.

    Only rank 0 warns (a launcher gives every rank the same knobs), and each knob once per process
    (not again at each ``init()`` after ``shutdown()``).
    """
    if rank != 0:
        return
    for name in inactive_knobs_set(env):
        with _warned_lock:
            if name in _warned:
                continue
            _warned.add(name)
        _log.warning("%s is set, but it has no effect: %s", name, INACTIVE_KNOBS[name].why)


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


def timeline_steps(raw: str | None) -> tuple[int, int]:
    """``HOROVOD_TIMELINE_STEPS``, ``A:B``: the timeline covers training steps A (counted from 0) to
    B, B excluded; ``A:`` runs to the end.

    :param raw: the variable's value, or None where it is unset.
    :returns: ``(A, B)``, B -1 for no end; ``(0, -1)`` when unset: the whole job.
    :raises ValueError: naming the variable, where ``raw`` is not such a window."""
    if raw is None or raw.strip() == "":
        return 0, -1
    first, colon, last = raw.strip().partition(":")
    try:
        begin = int(first)
        end = int(last) if last.strip() else -1
    except ValueError:
        begin, end = -1, -1
    if not colon or begin < 0 or (end != -1 and end <= begin):
        raise ValueError(
            f"HOROVOD_TIMELINE_STEPS={raw!r} is not a window of steps: expected A:B (steps A to B, B excluded, "
            "0 <= A < B) or A: (from step A to the end), such as 10:20"
        )
    return begin, end


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


def failure_report_key(job_key: str) -> str:
    """The store key under which a launcher describes the first rank its job lost (one line of
    text, or empty for none): the contract between launchers and the engine.

    :param job_key: the key prefix unique to the job (``HOROVOD_JOB_KEY``; for a world of an elastic
        job, that world's own key prefix).
    """
    return f"{job_key}/lost"


def host_key(env: Mapping[str, str]) -> str:
    """What names this rank's host, equal for the ranks of one host: the launcher's host name for
    it, else this machine's name."""
    return env.get("HOROVOD_HOSTNAME") or socket.gethostname()


def engine_config(
    core: Any, env: Mapping[str, str], *, rank: int, size: int, key_prefix: str, local_rank: int | None = None
) -> Any:
    """A ``_core.EngineConfig`` from the ``HOROVOD_*`` knobs, with Horovod's defaults.

    ``local_rank``: this rank's place on its host, for HOROVOD_HIERARCHICAL_ALLREDUCE; None where the
    world's hosts are not known as the engine starts (a world made of some of a job's ranks), which
    then reduces flat and says so.
    """
    config = core.EngineConfig()
    config.rank = rank
    config.size = size
    config.key_prefix = key_prefix
    config.fusion_threshold = _int(env, "HOROVOD_FUSION_THRESHOLD", 128 * 1024 * 1024, minimum=0)
    config.cycle_time_ms = _float(env, "HOROVOD_CYCLE_TIME", 1.0)
    config.cache_capacity = _int(env, "HOROVOD_CACHE_CAPACITY", 1024, minimum=0)
    # hvd's own knob: bytes of small cached allreduces each rank sends inside negotiation (0: never).
    config.inline_bytes = _int(env, "HOROVOD_NEGOTIATION_INLINE_BYTES", 1024, minimum=0)
    # ... and how much it may grow by while cached ops a little larger are running (over all ranks'
    # records together; 0: it never grows).
    config.inline_max_bytes = _int(env, "HOROVOD_NEGOTIATION_INLINE_MAX_BYTES", 128 * 1024, minimum=0)
    # hvd's own knob: the largest message a rank sends a peer ahead of negotiation (a cached
    # broadcast's or alltoall's data, over TCP); each rank keeps that much space per peer (0: never).
    config.eager_bytes = _int(env, "HOROVOD_NEGOTIATION_EAGER_BYTES", 4 << 20, minimum=0)
    # hvd's own knob: freed large outputs (allgather, alltoall, reducescatter; 32 MiB and up) kept
    # mapped for the next output of their size, up to this many bytes per rank (0: none kept).
    config.output_pool_bytes = _int(env, "HOROVOD_OUTPUT_POOL_BYTES", 1 << 30, minimum=0)
    config.stall_check_enabled = not _bool(env, "HOROVOD_STALL_CHECK_DISABLE")
    config.job_stats_enabled = not _bool(env, "HOROVOD_JOB_REPORT_DISABLE")
    config.stall_check_s = _float(env, "HOROVOD_STALL_CHECK_TIME_SECONDS", 60.0)
    config.stall_shutdown_s = _float(env, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", 0.0)
    timeline = env.get("HOROVOD_TIMELINE", "")
    config.timeline_path = "" if timeline in ("", "DYNAMIC") else timeline
    config.timeline_mark_cycles = _bool(env, "HOROVOD_TIMELINE_MARK_CYCLES")
    config.timeline_max_bytes = _int(env, "HOROVOD_TIMELINE_MAX_BYTES", 0)
    config.timeline_all_ranks = _bool(env, "HOROVOD_TIMELINE_ALL_RANKS")
    config.timeline_steps_from, config.timeline_steps_to = timeline_steps(env.get("HOROVOD_TIMELINE_STEPS"))
    level = env.get("HOROVOD_LOG_LEVEL", "warning").strip().lower() or "warning"
    if level not in LOG_LEVELS:
        raise ValueError(f"HOROVOD_LOG_LEVEL={level!r} is not one of {', '.join(LOG_LEVELS)}")
    config.log_level = LOG_LEVELS[level]
    config.log_hide_time = _bool(env, "HOROVOD_LOG_HIDE_TIME")
    config.timeout_ms = int(_float(env, "HOROVOD_GLOO_TIMEOUT_SECONDS", 30.0, minimum=0.001) * 1000)
    config.dynamic_process_sets = _bool(env, "HOROVOD_DYNAMIC_PROCESS_SETS")
    # hvd's own knob: the device layer for device tensors, "cuda" (the default) or "simulated" (tests).
    device = env.get("HOROVOD_DEVICE", "").strip().lower()
    if device not in ("", "cuda", "simulated"):
        raise ValueError(f"HOROVOD_DEVICE={device!r} is not one of cuda, simulated")
    config.device = device
    config.thread_affinity = thread_affinity(env, local_rank if local_rank is not None else 0)
    # Horovod's HOROVOD_NCCL_TIMEOUT-like bound, on by default: queued GPU work not complete in this
    # many seconds (a peer lost mid-collective) fails the job on every rank instead of hanging it.
    config.device_timeout_ms = int(_float(env, "HOROVOD_NCCL_TIMEOUT", 300.0, minimum=0.001) * 1000)
    # A launcher (horovodrun) describes a lost rank in the job's store; the engine adds that to the
    # error its peers raise, waiting up to this long for it to appear.
    job_key = env.get("HOROVOD_JOB_KEY", "").strip()
    config.failure_report_key = failure_report_key(job_key) if job_key else ""
    config.failure_report_wait_ms = int(_float(env, "HOROVOD_FAILURE_REPORT_WAIT_SECONDS", 3.0) * 1000)
    _autotune(config, env, local_rank)
    for knob in ("HOROVOD_HIERARCHICAL_ALLREDUCE", "HOROVOD_HIERARCHICAL_ALLGATHER"):
        if not _bool(env, knob):
            continue
        if local_rank is None:
            _log.warning("%s has no effect in a world made with init(comm=...)", knob)
            continue
        setattr(config, knob.removeprefix("HOROVOD_").lower(), True)
        config.host_key = host_key(env)
        config.local_rank = local_rank
    warn_inactive_knobs(env, rank=rank)
    return config


def _autotune(config: Any, env: Mapping[str, str], local_rank: int | None) -> None:
    """HOROVOD_AUTOTUNE: the engine takes tuned settings while it runs, knows the hosts (the
    hierarchical switches are tuned where the job spans them), and starts from
    HOROVOD_AUTOTUNE_START's settings where given (horovod.common.autotune)."""
    from horovod.common.autotune import AutotuneOptions, started_settings

    options = AutotuneOptions.from_env(env)
    if not options.enabled:
        return
    config.autotune = True
    start = started_settings(env, options, config)
    config.fusion_threshold, config.cycle_time_ms = start.fusion_threshold, start.cycle_time_ms
    if local_rank is not None:
        config.host_key = host_key(env)
        config.local_rank = local_rank


def thread_affinity(env: Mapping[str, str], local_rank: int) -> int:
    """The core HOROVOD_THREAD_AFFINITY pins this rank's engine thread to, -1 for none: as Horovod,
    a comma-separated list of cores, the local rank's entry (one core alone serves every rank)."""
    raw = env.get("HOROVOD_THREAD_AFFINITY", "").strip()
    if not raw:
        return -1
    try:
        cores = [int(c) for c in raw.split(",")]
    except ValueError:
        cores = []
    if not cores or min(cores) < 0:
        raise ValueError(f"HOROVOD_THREAD_AFFINITY={raw!r} must list core numbers, one per local rank (e.g. 0,1)")
    if len(cores) > 1 and local_rank >= len(cores):
        raise ValueError(
            f"HOROVOD_THREAD_AFFINITY={raw!r} lists {len(cores)} cores, but this is local rank {local_rank}: "
            "give one core per local rank"
        )
    return cores[local_rank if len(cores) > 1 else 0]


def requested_backend(env: Mapping[str, str]) -> str | None:
    """The CPU backend the user asked for (HOROVOD_CPU_OPERATIONS, then HOROVOD_CONTROLLER)."""
    for key in ("HOROVOD_CPU_OPERATIONS", "HOROVOD_CONTROLLER"):
        value = env.get(key, "").strip().lower()
        if value:
            return value
    return None
