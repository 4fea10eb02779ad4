"""horovodrun's command line: every flag of Horovod's horovodrun, plus --list-plugins.

Parsing only. Every option defaults to None, so "given on the command line" is "not None" (the
config file fills in only what the command line left out). What each flag does, and which are
refused for now, is decided in :mod:`horovod.runner.settings`.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from horovod.common.plugin_api import timeline_steps
from horovod.runner.env_mapping import LOG_LEVELS

Number = TypeVar("Number", int, float)


def _number(convert: Callable[[str], Number], kind: str, minimum: float, too_small: str) -> Callable[[str], Number]:
    """An argparse type: ``convert`` of the text, at least ``minimum``; errors name the value."""

    def parse(text: str) -> Number:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
        if not value >= minimum:
            raise argparse.ArgumentTypeError(f"{value} {too_small}")
        return value

    return parse


_positive_int = _number(int, "an integer", 1, "is not a positive integer (at least 1 process)")
_nonnegative_int = _number(int, "an integer", 0, "must not be negative")
_nonnegative_float = _number(float, "a number", 0.0, "must not be negative")


def _log_level(text: str) -> str:
    if text.upper() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(LOG_LEVELS)}")
    return text.upper()


def _timeline_steps(text: str) -> str:
    try:
        timeline_steps(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).replace("HOROVOD_TIMELINE_STEPS=", "")) from None
    return text


class _NicsAction(argparse.Action):
    """``--network-interface(s) a,b`` (repeatable): the union, in the order given."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        names = [n.strip() for n in str(values).split(",")]
        if not all(names):
            parser.error(f"argument {option_string}: empty interface name in {values!r}")
        current = list(getattr(namespace, self.dest) or [])
        current += [n for n in names if n not in current]
        setattr(namespace, self.dest, current)


class _VersionAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        import horovod
        from horovod.runner.version import __version__

        sys.stdout.write(f"{horovod.__version__} (hvd-runner {__version__})\n")
        parser.exit(0)


class _DeprecatedSwitch(argparse.Action):
    """A switch Horovod kept under an older name: sets ``const``, with Horovod's DeprecationWarning."""

    def __init__(
        self, option_strings: Sequence[str], dest: str, *, const: bool, replacement: str, **kwargs: Any
    ) -> None:
        super().__init__(option_strings, dest, nargs=0, const=const, default=None, **kwargs)
        self.replacement = replacement

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        warnings.warn(f"{option_string} is deprecated; use {self.replacement}", DeprecationWarning, stacklevel=2)
        setattr(namespace, self.dest, self.const)


def _switch(group: Any, *flags: str, dest: str, value: bool = True, help: str | None = None) -> None:
    group.add_argument(*flags, dest=dest, action="store_const", const=value, default=None, help=help)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="horovodrun",
        description="Launch a Horovod job: starts -np ranks of COMMAND, connected by an authenticated rendezvous.",
        epilog="Example: horovodrun -np 4 -H localhost:4 python train.py",
    )
    parser.add_argument("-v", "--version", action=_VersionAction, help="Show the Horovod version and exit.")
    parser.add_argument(
        "-np",
        "--num-proc",
        dest="num_proc",
        type=_positive_int,
        default=None,
        help="Total number of processes (ranks) to start.",
    )
    _switch(
        parser,
        "-cb",
        "--check-build",
        dest="check_build",
        help="Show which frameworks, controllers and tensor operations are installed, and exit.",
    )
    _switch(
        parser,
        "--list-plugins",
        dest="list_plugins",
        help="List the installed hvd plugins (name, distribution, version, status, reason), and exit.",
    )
    _switch(
        parser,
        "--disable-cache",
        dest="disable_cache",
        help="Check every remote host over ssh again instead of using the answers of the last hour "
        "($XDG_CACHE_HOME/hvd/host-checks.json).",
    )
    parser.add_argument(
        "--start-timeout",
        dest="start_timeout",
        type=_positive_int,
        default=None,
        help="Seconds to start every rank (default: $HOROVOD_START_TIMEOUT or 30); also given "
        "to the ranks as HOROVOD_START_TIMEOUT.",
    )
    parser.add_argument(
        "--network-interfaces",
        "--network-interface",
        dest="nics",
        action=_NicsAction,
        default=None,
        help="Network interface(s) for communication, comma-separated or repeated (e.g. eth0,eth1); "
        "default: the interfaces every host has on one shared network (checked over ssh).",
    )
    parser.add_argument(
        "--output-filename",
        dest="output_filename",
        default=None,
        help="Also write each rank's output to <DIR>/rank.<N>/stdout and stderr (rank zero-padded).",
    )
    parser.add_argument(
        "--report-file",
        dest="report_file",
        default=None,
        help="Write the job-end report (per rank: collectives' time and bytes, waits, stragglers, slowest tensors, "
        "stalls, the failure) to this JSON file.",
    )
    _switch(
        parser,
        "--no-job-report",
        dest="job_report",
        value=False,
        help="Do not print the job-end report's summary when the job ends (--report-file still writes it).",
    )
    _switch(parser, "--verbose", dest="verbose", help="Print what the launcher does (secrets are masked).")
    parser.add_argument(
        "--config-file",
        dest="config_file",
        default=None,
        help="YAML file of runtime parameters (Horovod's layout); command-line flags win over it.",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="The command each rank runs.")

    ssh = parser.add_argument_group("SSH arguments (remote hosts are reached with OpenSSH's ssh)")
    ssh.add_argument(
        "-p", "--ssh-port", dest="ssh_port", type=_positive_int, default=None, help="SSH port on all hosts."
    )
    ssh.add_argument(
        "-i", "--ssh-identity-file", dest="ssh_identity_file", default=None, help="SSH identity (private key) file."
    )

    params = parser.add_argument_group("tunable parameter arguments")
    params.add_argument(
        "--fusion-threshold-mb",
        dest="fusion_threshold_mb",
        type=_nonnegative_int,
        default=None,
        help="Fusion buffer threshold in MB (HOROVOD_FUSION_THRESHOLD; 0 disables fusion).",
    )
    params.add_argument(
        "--cycle-time-ms",
        dest="cycle_time_ms",
        type=_nonnegative_float,
        default=None,
        help="Cycle time in ms (HOROVOD_CYCLE_TIME).",
    )
    params.add_argument(
        "--cache-capacity",
        dest="cache_capacity",
        type=_nonnegative_int,
        default=None,
        help="Response cache capacity (HOROVOD_CACHE_CAPACITY).",
    )
    hier_ar = params.add_mutually_exclusive_group()
    _switch(
        hier_ar, "--hierarchical-allreduce", dest="hierarchical_allreduce", help="HOROVOD_HIERARCHICAL_ALLREDUCE=1."
    )
    _switch(
        hier_ar,
        "--no-hierarchical-allreduce",
        dest="hierarchical_allreduce",
        value=False,
        help="HOROVOD_HIERARCHICAL_ALLREDUCE=0.",
    )
    hier_ag = params.add_mutually_exclusive_group()
    _switch(
        hier_ag,
        "--hierarchical-allgather",
        dest="hierarchical_allgather",
        help="HOROVOD_HIERARCHICAL_ALLGATHER=1 (no effect yet).",
    )
    _switch(
        hier_ag,
        "--no-hierarchical-allgather",
        dest="hierarchical_allgather",
        value=False,
        help="HOROVOD_HIERARCHICAL_ALLGATHER=0.",
    )

    torus = params.add_mutually_exclusive_group()
    _switch(torus, "--torus-allreduce", dest="torus_allreduce", help="HOROVOD_TORUS_ALLREDUCE=1 (no effect yet).")
    _switch(
        torus,
        "--no-torus-allreduce",
        dest="torus_allreduce",
        value=False,
        help="HOROVOD_TORUS_ALLREDUCE=0.",
    )

    autotune = parser.add_argument_group("autotune arguments (rank 0 tunes the engine while training runs)")
    auto_on = autotune.add_mutually_exclusive_group()
    _switch(auto_on, "--autotune", dest="autotune", help="HOROVOD_AUTOTUNE=1.")
    _switch(auto_on, "--no-autotune", dest="autotune", value=False, help=argparse.SUPPRESS)
    autotune.add_argument("--autotune-log-file", dest="autotune_log_file", default=None, help="HOROVOD_AUTOTUNE_LOG.")
    autotune.add_argument(
        "--autotune-warmup-samples",
        dest="autotune_warmup_samples",
        type=_nonnegative_int,
        default=None,
        help="HOROVOD_AUTOTUNE_WARMUP_SAMPLES.",
    )
    autotune.add_argument(
        "--autotune-steps-per-sample",
        dest="autotune_steps_per_sample",
        type=_nonnegative_int,
        default=None,
        help="HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE.",
    )
    autotune.add_argument(
        "--autotune-bayes-opt-max-samples",
        dest="autotune_bayes_opt_max_samples",
        type=_nonnegative_int,
        default=None,
        help="HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES.",
    )
    autotune.add_argument(
        "--autotune-gaussian-process-noise",
        dest="autotune_gaussian_process_noise",
        type=_nonnegative_float,
        default=None,
        help="HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE, in [0, 1].",
    )

    elastic = parser.add_argument_group(
        "elastic arguments (any of --min-np, --max-np, --host-discovery-script makes a job elastic)"
    )
    elastic.add_argument(
        "--min-np",
        "--min-num-proc",
        dest="min_num_proc",
        type=_positive_int,
        default=None,
        help="Minimum number of processes for training to continue.",
    )
    elastic.add_argument(
        "--max-np",
        "--max-num-proc",
        dest="max_num_proc",
        type=_positive_int,
        default=None,
        help="Maximum number of processes.",
    )
    elastic.add_argument(
        "--slots-per-host",
        "--slots",
        dest="slots",
        type=_positive_int,
        default=None,
        help="Slots of a host the discovery script prints without :slots.",
    )
    elastic.add_argument(
        "--elastic-timeout",
        dest="elastic_timeout",
        type=_positive_int,
        default=None,
        help="Seconds a new world may take to form after a change (HOROVOD_ELASTIC_TIMEOUT; default 600).",
    )
    elastic.add_argument(
        "--reset-limit",
        dest="reset_limit",
        type=_nonnegative_int,
        default=None,
        help="Maximum number of times the job may scale up or down.",
    )
    elastic.add_argument(
        "--blacklist-cooldown-range",
        dest="cooldown_range",
        type=_nonnegative_int,
        nargs=2,
        default=None,
        metavar=("MIN", "MAX"),
        help="Seconds a host whose workers keep failing stays out: MIN, doubling up to MAX (default: for good).",
    )

    timeline = parser.add_argument_group("timeline arguments")
    timeline.add_argument(
        "--timeline-filename",
        dest="timeline_filename",
        default=None,
        help="Write a Chrome-trace timeline to this file (HOROVOD_TIMELINE).",
    )
    timeline.add_argument(
        "--timeline-max-mb",
        dest="timeline_max_mb",
        type=_nonnegative_int,
        default=None,
        help="Stop the timeline, with a note as its last event, when its file reaches this many MB "
        "(HOROVOD_TIMELINE_MAX_BYTES; default 0: no cap).",
    )
    _switch(
        timeline,
        "--timeline-all-ranks",
        dest="timeline_all_ranks",
        help="Every rank writes its own timeline (<FILE>.rank<N>, HOROVOD_TIMELINE_ALL_RANKS=1); horovodrun merges "
        "them into FILE when the job ends, on one clock, a track per rank.",
    )
    timeline.add_argument(
        "--timeline-steps",
        dest="timeline_steps",
        type=_timeline_steps,
        default=None,
        metavar="A:B",
        help="Record only training steps A to B (B excluded; A: to the end), as each rank counts them: a step "
        "begins where a tensor name comes again (HOROVOD_TIMELINE_STEPS).",
    )
    cycles = timeline.add_mutually_exclusive_group()
    _switch(cycles, "--timeline-mark-cycles", dest="timeline_mark_cycles", help="HOROVOD_TIMELINE_MARK_CYCLES=1.")
    _switch(cycles, "--no-timeline-mark-cycles", dest="timeline_mark_cycles", value=False, help=argparse.SUPPRESS)

    stall = parser.add_argument_group("stall check arguments")
    stall_on = stall.add_mutually_exclusive_group()
    _switch(stall_on, "--no-stall-check", dest="no_stall_check", help="HOROVOD_STALL_CHECK_DISABLE=1.")
    _switch(stall_on, "--stall-check", dest="no_stall_check", value=False, help=argparse.SUPPRESS)
    stall.add_argument(
        "--stall-check-warning-time-seconds",
        dest="stall_check_warning_time_seconds",
        type=_nonnegative_int,
        default=None,
        help="HOROVOD_STALL_CHECK_TIME_SECONDS.",
    )
    stall.add_argument(
        "--stall-check-shutdown-time-seconds",
        dest="stall_check_shutdown_time_seconds",
        type=_nonnegative_int,
        default=None,
        help="HOROVOD_STALL_SHUTDOWN_TIME_SECONDS.",
    )

    library = parser.add_argument_group("library arguments")
    mpi_threads = library.add_mutually_exclusive_group()
    _switch(mpi_threads, "--mpi-threads-disable", dest="mpi_threads_disable", help="HOROVOD_MPI_THREADS_DISABLE=1.")
    _switch(mpi_threads, "--no-mpi-threads-disable", dest="mpi_threads_disable", value=False, help=argparse.SUPPRESS)
    library.add_argument("--mpi-args", dest="mpi_args", default=None, help="Extra mpirun arguments (with --mpi).")
    _switch(library, "--tcp", dest="tcp_flag", help="Use TCP only (NCCL_IB_DISABLE=1).")
    library.add_argument(
        "--binding-args", dest="binding_args", default=None, help="Process binding arguments (with --mpi)."
    )
    library.add_argument(
        "--num-nccl-streams",
        dest="num_nccl_streams",
        type=_nonnegative_int,
        default=None,
        help="HOROVOD_NUM_NCCL_STREAMS (no effect: hvd queues a GPU's NCCL work on one stream).",
    )
    library.add_argument(
        "--num-threads-per-rank",
        dest="num_threads_per_rank",
        type=_nonnegative_int,
        default=None,
        help="Intra-op threads of each rank (OMP_NUM_THREADS, MKL_NUM_THREADS, TF_NUM_INTRAOP_THREADS, "
        "MXNET_OMP_MAX_THREADS); by default the host's cores over its ranks where those are not set; "
        "0 leaves them alone. HOROVOD_NUM_THREADS_PER_RANK.",
    )
    library.add_argument(
        "--thread-affinity",
        dest="thread_affinity",
        type=_nonnegative_int,
        default=None,
        help="HOROVOD_THREAD_AFFINITY: the core the engine's thread is pinned to.",
    )
    library.add_argument(
        "--ccl-bgt-affinity", dest="ccl_bgt_affinity", type=_nonnegative_int, default=None, help=argparse.SUPPRESS
    )
    library.add_argument(
        "--gloo-timeout-seconds",
        dest="gloo_timeout_seconds",
        type=_nonnegative_int,
        default=None,
        help="HOROVOD_GLOO_TIMEOUT_SECONDS.",
    )

    logging_group = parser.add_argument_group("logging arguments")
    logging_group.add_argument(
        "--log-level",
        dest="log_level",
        type=_log_level,
        default=None,
        help=f"HOROVOD_LOG_LEVEL, one of {', '.join(LOG_LEVELS)}.",
    )
    stamps = logging_group.add_mutually_exclusive_group()
    _switch(stamps, "--log-without-timestamp", dest="log_with_timestamp", value=False, help="HOROVOD_LOG_HIDE_TIME=1.")
    _switch(stamps, "--log-with-timestamp", dest="log_with_timestamp", help=argparse.SUPPRESS)
    # Horovod's older spellings, deprecated there in favour of the two above.
    stamps.add_argument(
        "--log-hide-timestamp",
        dest="log_with_timestamp",
        action=_DeprecatedSwitch,
        const=False,
        replacement="--log-without-timestamp",
        help=argparse.SUPPRESS,
    )
    stamps.add_argument(
        "--no-log-hide-timestamp",
        dest="log_with_timestamp",
        action=_DeprecatedSwitch,
        const=True,
        replacement="--log-with-timestamp",
        help=argparse.SUPPRESS,
    )
    _switch(
        logging_group,
        "-prefix-timestamp",
        "--prefix-output-with-timestamp",
        dest="prefix_output_with_timestamp",
        help="Prefix every line of the ranks' output with the time.",
    )

    hosts = parser.add_argument_group("host arguments").add_mutually_exclusive_group()
    hosts.add_argument(
        "-H", "--hosts", dest="hosts", default=None, help="Hosts and slots, host1:2,host2:4 (default: localhost:<np>)."
    )
    hosts.add_argument(
        "-hostfile", "--hostfile", dest="hostfile", default=None, help="File of '<hostname> slots=<N>' lines."
    )
    hosts.add_argument(
        "--host-discovery-script",
        dest="host_discovery_script",
        default=None,
        help="Script printing the available hosts, one host:slots per line; run again every second.",
    )

    controller = parser.add_argument_group("controller arguments").add_mutually_exclusive_group()
    _switch(
        controller,
        "--gloo",
        dest="use_gloo",
        help="Use the Gloo backend (HOROVOD_CPU_OPERATIONS=gloo). Without --gloo/--mpi: HOROVOD_CONTROLLER, else Gloo.",
    )
    _switch(
        controller,
        "--mpi",
        "--use-mpi",
        dest="use_mpi",
        help="Use the MPI backend: mpirun starts the ranks (needs hvd-backend-mpi and an MPI).",
    )
    _switch(controller, "--jsrun", dest="use_jsrun", help="Launch through jsrun (not supported yet).")
    return parser


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parses horovodrun's arguments (argparse exits with status 2 on a malformed one)."""
    return build_parser().parse_args(argv)
