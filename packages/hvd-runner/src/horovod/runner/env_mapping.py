"""The tunables: one table from each horovodrun flag to its ``HOROVOD_*`` variable and config-file key.

A flag left out (value None) exports nothing, so a variable already in the launcher's environment
reaches the ranks unchanged; a flag given (or a config-file key) sets the variable for every rank.
Whether hvd acts on a variable is decided where it is read: hvd-core warns (rank 0, once) for each
Horovod knob it accepts but does not act on yet, naming it and saying why (autotuning, hierarchical
allgather, torus allreduce, NCCL streams, thread affinity...).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from horovod.runner.errors import UsageError

LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL")


def _flag(value: Any) -> str:
    return "1" if value else "0"


def _inverted_flag(value: Any) -> str:
    return "0" if value else "1"


def _mb_to_bytes(value: Any) -> str:
    return str(int(value) * 1024 * 1024)


def _number(value: Any) -> str:
    return str(value)


def _level(value: Any) -> str:
    return str(value).upper()


@dataclasses.dataclass(frozen=True)
class Tunable:
    #: The argparse destination (``--fusion-threshold-mb`` -> ``fusion_threshold_mb``).
    dest: str
    #: The variable set in every rank's environment.
    env: str
    #: Turns the flag's value into the variable's text.
    convert: Callable[[Any], str]
    #: The value's type, for config-file values: int, float, bool or str.
    kind: type
    #: Where it lives in a --config-file: (section, key); None if it has no config key.
    config: tuple[str, str] | None = None
    #: The config key means the opposite of the flag (``stall_check.enabled`` vs ``--no-stall-check``).
    config_inverted: bool = False
    #: Smallest and largest accepted value (numbers only).
    minimum: float | None = 0
    maximum: float | None = None
    #: Accepted values (strings only, compared in upper case).
    choices: tuple[str, ...] | None = None
    #: Set only when true (a flag whose absence and "false" mean the same: e.g. --tcp).
    only_when_true: bool = False


TUNABLES: tuple[Tunable, ...] = (
    # params
    Tunable("fusion_threshold_mb", "HOROVOD_FUSION_THRESHOLD", _mb_to_bytes, int, ("params", "fusion_threshold_mb")),
    Tunable("cycle_time_ms", "HOROVOD_CYCLE_TIME", _number, float, ("params", "cycle_time_ms")),
    Tunable("cache_capacity", "HOROVOD_CACHE_CAPACITY", _number, int, ("params", "cache_capacity")),
    Tunable(
        "hierarchical_allreduce", "HOROVOD_HIERARCHICAL_ALLREDUCE", _flag, bool, ("params", "hierarchical_allreduce")
    ),
    Tunable(
        "hierarchical_allgather", "HOROVOD_HIERARCHICAL_ALLGATHER", _flag, bool, ("params", "hierarchical_allgather")
    ),
    Tunable("torus_allreduce", "HOROVOD_TORUS_ALLREDUCE", _flag, bool, ("params", "torus_allreduce")),
    # autotune
    Tunable("autotune", "HOROVOD_AUTOTUNE", _flag, bool, ("autotune", "enabled")),
    Tunable("autotune_log_file", "HOROVOD_AUTOTUNE_LOG", str, str, ("autotune", "log_file")),
    Tunable("autotune_warmup_samples", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", _number, int, ("autotune", "warmup_samples")),
    Tunable(
        "autotune_steps_per_sample", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", _number, int, ("autotune", "steps_per_sample")
    ),
    Tunable(
        "autotune_bayes_opt_max_samples",
        "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
        _number,
        int,
        ("autotune", "bayes_opt_max_samples"),
    ),
    Tunable(
        "autotune_gaussian_process_noise",
        "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
        _number,
        float,
        ("autotune", "gaussian_process_noise"),
        maximum=1,
    ),
    # timeline
    Tunable("timeline_filename", "HOROVOD_TIMELINE", str, str, ("timeline", "filename")),
    Tunable("timeline_mark_cycles", "HOROVOD_TIMELINE_MARK_CYCLES", _flag, bool, ("timeline", "mark_cycles")),
    Tunable("timeline_max_mb", "HOROVOD_TIMELINE_MAX_BYTES", _mb_to_bytes, int, ("timeline", "max_mb")),
    Tunable("timeline_all_ranks", "HOROVOD_TIMELINE_ALL_RANKS", _flag, bool, ("timeline", "all_ranks")),
    Tunable("timeline_steps", "HOROVOD_TIMELINE_STEPS", str, str, ("timeline", "steps")),
    # stall check
    Tunable(
        "no_stall_check", "HOROVOD_STALL_CHECK_DISABLE", _flag, bool, ("stall_check", "enabled"), config_inverted=True
    ),
    Tunable(
        "stall_check_warning_time_seconds",
        "HOROVOD_STALL_CHECK_TIME_SECONDS",
        _number,
        int,
        ("stall_check", "warning_time_seconds"),
    ),
    Tunable(
        "stall_check_shutdown_time_seconds",
        "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",
        _number,
        int,
        ("stall_check", "shutdown_time_seconds"),
    ),
    # library options
    Tunable(
        "mpi_threads_disable", "HOROVOD_MPI_THREADS_DISABLE", _flag, bool, ("library_options", "mpi_threads_disable")
    ),
    Tunable("num_nccl_streams", "HOROVOD_NUM_NCCL_STREAMS", _number, int, ("library_options", "num_nccl_streams")),
    Tunable("thread_affinity", "HOROVOD_THREAD_AFFINITY", _number, int, ("library_options", "thread_affinity")),
    Tunable("num_threads_per_rank", "HOROVOD_NUM_THREADS_PER_RANK", _number, int),
    Tunable("ccl_bgt_affinity", "HOROVOD_CCL_BGT_AFFINITY", _number, int, ("library_options", "ccl_bgt_affinity")),
    Tunable(
        "gloo_timeout_seconds",
        "HOROVOD_GLOO_TIMEOUT_SECONDS",
        _number,
        int,
        ("library_options", "gloo_timeout_seconds"),
    ),
    Tunable("tcp_flag", "NCCL_IB_DISABLE", _flag, bool, only_when_true=True),
    # logging
    Tunable("log_level", "HOROVOD_LOG_LEVEL", _level, str, ("logging", "level"), choices=LOG_LEVELS),
    Tunable("log_with_timestamp", "HOROVOD_LOG_HIDE_TIME", _inverted_flag, bool, ("logging", "with_timestamp")),
)

BY_DEST: dict[str, Tunable] = {t.dest: t for t in TUNABLES}
BY_CONFIG_KEY: dict[tuple[str, str], Tunable] = {t.config: t for t in TUNABLES if t.config is not None}


def validate(tunable: Tunable, value: Any, where: str) -> Any:
    """``value`` checked against ``tunable``'s type and range; raises UsageError naming ``where``."""
    kind = tunable.kind
    if kind is bool:
        if not isinstance(value, bool):
            raise UsageError(f"{where}: expected true or false, got {value!r}")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise UsageError(f"{where}: expected an integer, got {value!r}")
    elif kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UsageError(f"{where}: expected a number, got {value!r}")
        value = float(value)
    elif kind is str:
        if not isinstance(value, str) or not value:
            raise UsageError(f"{where}: expected a non-empty string, got {value!r}")
        if tunable.choices is not None:
            if value.upper() not in tunable.choices:
                raise UsageError(f"{where}: {value!r} is not one of {', '.join(tunable.choices)}")
            value = value.upper()
        return value
    if tunable.minimum is not None and value < tunable.minimum:
        raise UsageError(f"{where}: {value} must be at least {tunable.minimum:g}")
    if tunable.maximum is not None and value > tunable.maximum:
        raise UsageError(f"{where}: {value} must be at most {tunable.maximum:g}")
    return value


def env_from_options(options: Mapping[str, Any]) -> dict[str, str]:
    """The ``HOROVOD_*`` variables for the tunables set in ``options`` (dest -> value; None: not set)."""
    env: dict[str, str] = {}
    for tunable in TUNABLES:
        value = options.get(tunable.dest)
        if value is None or (tunable.only_when_true and not value):
            continue
        env[tunable.env] = tunable.convert(value)
    return env
