"""The mpirun command line for ``horovodrun --mpi``, in the syntax of the MPI found.

Pure: from a description of the job to an argv, so both flavours are tested without running them.
Order: the launcher's own switches, ``-np``, hosts, binding, ssh, network, output, the exported
variable names, then ``--mpi-args`` verbatim (last, so that the user's options come after ours),
then the command. Variables are exported by name only (Open MPI ``-x NAME``, Hydra
``-genvlist A,B``): their values stay in mpirun's environment, never on a command line that
``ps`` or ``--verbose`` shows.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence

from horovod.runner.errors import UsageError
from horovod.runner.hosts import Host
from horovod.runner.mpi_impl import OPENMPI

#: Horovod's default for Open MPI: no binding (a rank's threads may use every core), ranks placed
#: slot by slot over the hosts in order.
OPENMPI_DEFAULT_BINDING = ("--bind-to", "none", "--map-by", "slot")
#: Hydra binds nothing by default and fills hosts in order; said explicitly, as Horovod does.
#: (Hydra's -map-by takes hardware objects: it has no "slot".)
MPICH_DEFAULT_BINDING = ("-bind-to", "none")

#: Options that set binding or mapping: when --mpi-args has one, our defaults would clash with it.
_BINDING_OPTIONS = ("-bind-to", "--bind-to", "-map-by", "--map-by", "-binding", "--rankfile", "-rankfile")


@dataclasses.dataclass(frozen=True)
class MpiJob:
    flavour: str
    launcher: str
    np: int
    hosts: Sequence[Host]
    command: Sequence[str]
    #: Names of the environment variables every rank gets from mpirun's environment.
    export: Sequence[str] = ()
    binding_args: str | None = None
    mpi_args: str | None = None
    #: Open MPI refuses to run as root without --allow-run-as-root.
    as_root: bool = False
    nics: Sequence[str] = ()
    #: Only given when a host is remote (mpirun reaches it over ssh).
    ssh_port: int | None = None
    ssh_identity_file: str | None = None
    output_filename: str | None = None
    prefix_timestamp: bool = False


def split_args(text: str | None, flag: str) -> list[str]:
    """``--mpi-args``/``--binding-args`` text as arguments, split as a POSIX shell would."""
    if not text:
        return []
    try:
        return shlex.split(text)
    except ValueError as error:
        raise UsageError(f"{flag} {text!r}: {error}") from None


def _sets_binding(args: Sequence[str]) -> bool:
    return any(arg.split("=", 1)[0] in _BINDING_OPTIONS for arg in args)


def _binding(job: MpiJob, mpi_args: list[str]) -> list[str]:
    if job.binding_args is not None:
        return split_args(job.binding_args, "--binding-args")
    if _sets_binding(mpi_args):
        return []
    return list(OPENMPI_DEFAULT_BINDING if job.flavour == OPENMPI else MPICH_DEFAULT_BINDING)


def _ssh(job: MpiJob) -> list[str]:
    if job.ssh_port is None and job.ssh_identity_file is None:
        return []
    ssh = []
    if job.ssh_port is not None:
        ssh += ["-p", str(job.ssh_port)]
    if job.ssh_identity_file is not None:
        ssh += ["-i", job.ssh_identity_file]
    if job.flavour == OPENMPI:
        return ["--mca", "plm_rsh_args", shlex.join(ssh)]
    # Hydra's -launcher-exec takes a program, not a command line with options.
    raise UsageError(
        "-p/--ssh-port and -i/--ssh-identity-file cannot be passed to MPICH's mpiexec: "
        "set them for the hosts in ~/.ssh/config instead"
    )


def _network(job: MpiJob) -> list[str]:
    if not job.nics:
        return []
    if job.flavour == OPENMPI:
        return ["--mca", "btl_tcp_if_include", ",".join(job.nics)]
    return ["-iface", job.nics[0]]  # Hydra takes one interface


def _output(job: MpiJob) -> list[str]:
    args = []
    if job.flavour == OPENMPI:
        if job.output_filename:
            args += ["--output-filename", job.output_filename]
        if job.prefix_timestamp:
            args.append("--timestamp-output")
    elif job.output_filename:
        # Hydra writes the files (the directory must exist: the caller makes it); %r is the rank.
        args += ["-outfile-pattern", f"{job.output_filename}/rank.%r.stdout"]
        args += ["-errfile-pattern", f"{job.output_filename}/rank.%r.stderr"]
    return args


def _export(job: MpiJob) -> list[str]:
    if not job.export:
        return []
    if job.flavour == OPENMPI:
        return [arg for name in job.export for arg in ("-x", name)]
    return ["-genvlist", ",".join(job.export)]


def build(job: MpiJob) -> list[str]:
    """The argv that starts ``job.np`` ranks of ``job.command`` through ``job.launcher``."""
    if not job.command:
        raise UsageError("no command given for mpirun to start")
    openmpi = job.flavour == OPENMPI
    mpi_args = split_args(job.mpi_args, "--mpi-args")
    argv = [job.launcher]
    if openmpi and job.as_root:
        argv.append("--allow-run-as-root")
    # Each line a rank prints is prefixed with its rank, as horovodrun does without MPI.
    argv.append("--tag-output" if openmpi else "-prepend-rank")
    argv += ["-np", str(job.np)]
    argv += ["-H" if openmpi else "-hosts", ",".join(f"{h.name}:{h.slots}" for h in job.hosts)]
    argv += _binding(job, mpi_args)
    argv += _ssh(job)
    argv += _network(job)
    argv += _output(job)
    argv += _export(job)
    argv += mpi_args
    argv += list(job.command)
    return argv
