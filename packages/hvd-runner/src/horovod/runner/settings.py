"""From parsed flags (horovodrun's or horovod.run's) to a checked description of the job.

This is where each flag's meaning is decided: which are implemented, which are refused for now
(with a message saying so, never silently ignored), and which are notes (accepted, no effect).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket

from horovod.runner import config_file, controller, env_mapping, hosts, worker_env
from horovod.runner.errors import NotSupportedError, UsageError
from horovod.runner.ssh import SshOptions

DEFAULT_START_TIMEOUT_S = 30

# dest -> how it is named in messages
ELASTIC_FLAGS = {
    "min_num_proc": "--min-np",
    "max_num_proc": "--max-np",
    "slots": "--slots-per-host",
    "elastic_timeout": "--elastic-timeout",
    "reset_limit": "--reset-limit",
    "cooldown_range": "--blacklist-cooldown-range",
    "host_discovery_script": "--host-discovery-script",
}
_MPI_ONLY = {"mpi_args": "--mpi-args", "binding_args": "--binding-args"}


@dataclasses.dataclass(frozen=True)
class JobSettings:
    """Everything needed to start the ranks of one job, here and on remote hosts."""

    placements: list[hosts.Placement]
    #: Variables every rank gets on top of the launcher's environment (tunables, backend choice...).
    env: dict[str, str]
    start_timeout_s: int
    output_filename: str | None = None
    verbose: bool = False
    prefix_timestamp: bool = False
    #: Address the rendezvous server binds to when every host is this machine (a job across hosts
    #: binds to this machine's address on the hosts' network instead: :mod:`horovod.runner.network`).
    rendezvous_host: str = "127.0.0.1"
    #: Things accepted that have no effect, to tell the user.
    notes: tuple[str, ...] = ()
    #: The hosts that are not this machine, reached with ``ssh``; empty for a job on this machine.
    remote_hosts: tuple[str, ...] = ()
    ssh: SshOptions = dataclasses.field(default_factory=SshOptions)
    #: --network-interface, if given.
    nics: tuple[str, ...] = ()
    #: False with --disable-cache: check every host over ssh again (:mod:`horovod.runner.host_check`).
    use_host_cache: bool = True
    #: --report-file: where the job-end report's JSON goes (:mod:`horovod.runner.job_report`).
    report_file: str | None = None
    #: False with --no-job-report: no summary printed when the job ends.
    job_report: bool = True

    @property
    def size(self) -> int:
        return len(self.placements)


def empty_namespace() -> argparse.Namespace:
    """horovodrun's flags, none given (what horovod.run starts from)."""
    from horovod.runner.cli import build_parser

    return build_parser().parse_args([])


def apply_config_file(ns: argparse.Namespace) -> list[str]:
    """Fills in, from ``--config-file``, what the command line left out; returns warnings."""
    if not ns.config_file:
        return []
    values, warnings = config_file.load(ns.config_file)
    controller_given = bool(ns.use_gloo or ns.use_mpi or ns.use_jsrun)
    for dest, value in values.items():
        if dest.startswith("use_"):
            if not controller_given:
                setattr(ns, dest, value)
        elif getattr(ns, dest, None) is None:
            setattr(ns, dest, value)
    return warnings


def refuse_elastic(ns: argparse.Namespace) -> None:
    """For launches that cannot be elastic (mpirun's)."""
    elastic = [flag for dest, flag in ELASTIC_FLAGS.items() if getattr(ns, dest, None) is not None]
    if elastic:
        raise NotSupportedError(
            f"elastic training through mpirun ({', '.join(elastic)})", "elastic jobs run on Gloo (drop --mpi)"
        )


def _refuse_elastic_flags(ns: argparse.Namespace) -> None:
    """Elastic-only flags in a job that is not elastic (no --min-np, --max-np or discovery script)."""
    given = [flag for dest, flag in ELASTIC_FLAGS.items() if getattr(ns, dest, None) is not None]
    if given:
        raise UsageError(
            f"{', '.join(given)} only apply to elastic jobs: add --min-np, --max-np or --host-discovery-script"
        )


def refuse_unsupported(ns: argparse.Namespace, environ: dict[str, str], *, elastic: bool = False) -> None:
    """What horovodrun's own launch cannot do (``horovodrun --mpi`` goes through mpi_run instead)."""
    if not elastic:
        _refuse_elastic_flags(ns)
    if ns.use_jsrun:
        raise NotSupportedError("launching through jsrun (--jsrun)", "use --mpi (mpirun), --gloo or the default")
    choice = controller.choose(ns, environ)
    if choice.mpi:
        # Only horovod.run gets here: horovodrun hands MPI jobs to mpi_run before.
        raise NotSupportedError(
            f"horovod.run through mpirun ({choice.reason})", "launch the script with horovodrun --mpi, or use Gloo"
        )
    mpi_only = [flag for dest, flag in _MPI_ONLY.items() if getattr(ns, dest, None)]
    if mpi_only:
        raise UsageError(
            f"{', '.join(mpi_only)} only apply when mpirun starts the ranks: add --mpi "
            f"(the controller now: {choice.reason})"
        )


def hosts_and_np(ns: argparse.Namespace) -> tuple[list[hosts.Host], int]:
    """The hosts (-H/--hostfile, default localhost:<np>) and -np (default: every slot), checked."""
    host_list: list[hosts.Host] | None = None
    if ns.hosts is not None:
        host_list = hosts.parse_hosts(ns.hosts)
    elif ns.hostfile is not None:
        host_list = hosts.parse_hostfile(ns.hostfile)
    np = ns.num_proc
    if np is None:
        if host_list is None:
            raise UsageError("-np/--num-proc is required (the number of processes to start)")
        np = sum(h.slots for h in host_list)
    if host_list is None:
        host_list = [hosts.Host("localhost", np)]
    return host_list, np


def no_effect_notes(ns: argparse.Namespace, *, local_only: bool) -> list[str]:
    """Flags accepted with no effect: the ssh ones and --disable-cache when every host is this machine."""
    notes = []
    if local_only:
        for dest, flag in (
            ("ssh_port", "-p/--ssh-port"),
            ("ssh_identity_file", "-i/--ssh-identity-file"),
            ("disable_cache", "--disable-cache"),
        ):
            if getattr(ns, dest):
                notes.append(f"{flag} has no effect: every host is this machine (nothing is reached over ssh)")
    return notes


def check_nics(nics: list[str]) -> None:
    try:
        available = [name for _, name in socket.if_nameindex()]
    except OSError:  # cannot list them here: let the backend report a bad name
        return
    unknown = [n for n in nics if n not in available]
    if unknown:
        raise UsageError(
            f"--network-interface: no interface named {', '.join(map(repr, unknown))} on this machine "
            f"(it has: {', '.join(available)})"
        )


def _check_gloo_installed() -> None:
    from horovod.common.plugin_api import get_plugin_manager

    if "gloo" not in get_plugin_manager().backends():
        raise UsageError("--gloo: the gloo backend is not installed: pip install hvd-backend-gloo")


def is_elastic(ns: argparse.Namespace) -> bool:
    """Whether the flags ask for an elastic job (as Horovod decides: a discovery script or --min-np/--max-np)."""
    return any(
        getattr(ns, dest, None) is not None for dest in ("host_discovery_script", "min_num_proc", "max_num_proc")
    )


def from_namespace(ns: argparse.Namespace, environ: dict[str, str] | None = None) -> JobSettings:
    """Checks the flags (config file already applied) and describes the job; raises UsageError."""
    environ = dict(os.environ if environ is None else environ)
    refuse_unsupported(ns, environ)
    host_list, np = hosts_and_np(ns)
    return job_settings(ns, environ, hosts.place_ranks(host_list, np))


def job_settings(ns: argparse.Namespace, environ: dict[str, str], placements: list[hosts.Placement]) -> JobSettings:
    """The job's settings for ``placements`` (an elastic job passes the hosts it found first)."""
    used = list(dict.fromkeys(p.hostname for p in placements))
    remote = tuple(name for name in used if not hosts.is_local(name))
    here = [name for name in used if name not in remote]
    if remote and len(here) > 1:
        raise UsageError(f"hosts {', '.join(here)} are all this machine: list it once, with all its slots")
    notes = no_effect_notes(ns, local_only=not remote)

    env = env_mapping.env_from_options(vars(ns))
    if ns.nics:
        if not remote:
            check_nics(ns.nics)  # a job across hosts checks them on every host as it starts
        env[worker_env.GLOO_IFACE] = ns.nics[0]
        env[worker_env.NCCL_SOCKET_IFNAME] = ",".join(ns.nics)
    if ns.use_gloo:
        _check_gloo_installed()
        env[worker_env.CPU_OPERATIONS] = "gloo"
        env[worker_env.CONTROLLER] = "gloo"

    start_timeout = ns.start_timeout
    if start_timeout is None:
        raw = environ.get(worker_env.START_TIMEOUT, "").strip()
        try:
            start_timeout = int(raw) if raw else DEFAULT_START_TIMEOUT_S
        except ValueError:
            raise UsageError(f"{worker_env.START_TIMEOUT}={raw!r} is not a number of seconds") from None
        if start_timeout < 1:
            raise UsageError(f"{worker_env.START_TIMEOUT}={raw!r} must be at least 1")
    env[worker_env.START_TIMEOUT] = str(start_timeout)

    return JobSettings(
        placements=placements,
        env=env,
        start_timeout_s=start_timeout,
        output_filename=ns.output_filename,
        verbose=bool(ns.verbose),
        prefix_timestamp=bool(ns.prefix_output_with_timestamp),
        notes=tuple(notes),
        remote_hosts=remote,
        ssh=SshOptions(port=ns.ssh_port, identity_file=ns.ssh_identity_file, connect_timeout_s=start_timeout),
        nics=tuple(ns.nics or ()),
        use_host_cache=not ns.disable_cache,
        report_file=ns.report_file,
        job_report=ns.job_report is not False,
    )


def describe(settings: JobSettings) -> list[str]:
    """Lines for --verbose: where each rank runs and what it is given."""
    lines = [f"{settings.size} rank(s):"]
    for p in settings.placements:
        over_ssh = " (ssh)" if p.hostname in settings.remote_hosts else ""
        lines.append(
            f"  rank {p.rank} on {p.hostname}{over_ssh}: local {p.local_rank}/{p.local_size}, "
            f"cross {p.cross_rank}/{p.cross_size}"
        )
    return lines
