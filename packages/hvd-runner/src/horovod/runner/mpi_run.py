"""``horovodrun --mpi``: mpirun starts the ranks; they learn rank and size from MPI.

No rendezvous server: hvd-backend-mpi needs none. horovodrun checks what the job needs (the MPI
backend and an MPI launcher), builds the mpirun command for the MPI found (:mod:`mpi_command`),
prints it with ``--verbose``, runs it and exits with its status, naming the failed rank when
mpirun's report says it.
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Callable, Mapping, Sequence

from horovod.runner import env_mapping, hosts, mpi_command, mpi_env, mpi_failure, mpi_impl, worker_env
from horovod.runner import settings as settings_mod
from horovod.runner.controller import MPI, Choice
from horovod.runner.errors import UsageError

_UNBUFFERED = "PYTHONUNBUFFERED"


def _check_backend() -> str | None:
    """None when hvd-backend-mpi is usable, else why not (with what to install)."""
    from horovod.common.plugin_api import PluginError, get_plugin_manager

    try:
        get_plugin_manager().backend(MPI)
    except PluginError as error:
        return str(error)
    return None


def find_mpi(environ: Mapping[str, str]) -> mpi_impl.MpiImpl:
    """The MPI that starts the job, with hvd-backend-mpi installed; UsageError saying what is missing."""
    problems = []
    launcher = mpi_impl.find_launcher(environ)
    if launcher is None:
        where = ", ".join(mpi_impl.search_dirs(environ))
        problems.append(f"no MPI launcher (mpirun or mpiexec) in {where}: {mpi_impl.INSTALL_HINT}")
    backend_problem = _check_backend()
    if backend_problem is not None:
        problems.append(backend_problem)
    if problems:
        raise UsageError("--mpi needs an MPI runtime and the MPI backend: " + "; ".join(problems))
    assert launcher is not None
    return mpi_impl.detect(launcher, environ)


def job_environment(ns: argparse.Namespace, impl: mpi_impl.MpiImpl, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables horovodrun sets for the ranks: the tunables, the controller, the interfaces."""
    env = env_mapping.env_from_options(vars(ns))
    env[worker_env.CONTROLLER] = MPI
    env[worker_env.CPU_OPERATIONS] = MPI
    if ns.nics:
        env[worker_env.NCCL_SOCKET_IFNAME] = ",".join(ns.nics)
    if ns.start_timeout is not None:
        env[worker_env.START_TIMEOUT] = str(ns.start_timeout)
    # Output reaches the terminal as it is printed. Not with MPICH: Hydra's -prepend-rank prefixes
    # every write, and unbuffered Python writes a print in pieces ("[1] a[1]  [1] b").
    if impl.flavour == mpi_impl.OPENMPI and _UNBUFFERED not in environ:
        env[_UNBUFFERED] = "1"
    return env


def prepare(
    ns: argparse.Namespace, command: Sequence[str], environ: Mapping[str, str], impl: mpi_impl.MpiImpl
) -> tuple[mpi_command.MpiJob, dict[str, str], list[str]]:
    """The mpirun job for flags ``ns``, mpirun's environment, and notes for the user."""
    settings_mod.refuse_elastic(ns)
    host_list, np = settings_mod.hosts_and_np(ns)
    hosts.place_ranks(host_list, np)  # refuses more ranks than slots, as without MPI
    all_local = all(hosts.is_local(h.name) for h in host_list)
    notes = settings_mod.no_effect_notes(ns, local_only=all_local)
    if ns.disable_cache and not all_local:
        notes.append("--disable-cache has no effect with --mpi: mpirun reaches the hosts, with no checks of hvd's")
    if ns.nics and all_local:
        settings_mod.check_nics(ns.nics)
    if ns.prefix_output_with_timestamp and impl.flavour == mpi_impl.MPICH:
        notes.append("--prefix-output-with-timestamp has no effect with MPICH (its mpiexec has no such option)")
    if ns.output_filename and impl.flavour == mpi_impl.MPICH:
        os.makedirs(ns.output_filename, exist_ok=True)  # Hydra opens the files but makes no directory
    if impl.flavour == mpi_impl.MPICH and environ.get(_UNBUFFERED, "") not in ("", "0"):
        notes.append(
            f"{_UNBUFFERED} is set: MPICH's mpiexec prefixes each write of a rank with its rank, so unbuffered "
            "Python output may show a line in pieces"
        )
    env = mpi_env.environment(environ, job_environment(ns, impl, environ))
    job = mpi_command.MpiJob(
        flavour=impl.flavour,
        launcher=impl.path,
        np=np,
        hosts=host_list,
        command=list(command),
        export=mpi_env.exported_names(env),
        binding_args=ns.binding_args,
        mpi_args=ns.mpi_args,
        as_root=os.geteuid() == 0,
        nics=ns.nics or (),
        ssh_port=None if all_local else ns.ssh_port,
        ssh_identity_file=None if all_local else ns.ssh_identity_file,
        output_filename=ns.output_filename,
        prefix_timestamp=bool(ns.prefix_output_with_timestamp),
    )
    return job, env, notes


def verbose_lines(choice: Choice, impl: mpi_impl.MpiImpl, job_env: Mapping[str, str], argv: Sequence[str]) -> list[str]:
    """What --verbose prints: values only of what horovodrun sets (masked); the rest by name in argv."""
    lines = [f"controller: mpi (from {choice.reason}); mpirun starts the ranks", f"MPI: {impl.describe()}"]
    lines.append("environment given to the ranks (besides the exported variables of this one):")
    lines += [f"  {key}={value}" for key, value in sorted(worker_env.masked(job_env).items())]
    lines.append("command: " + shlex.join(argv))
    return lines


def launch(
    ns: argparse.Namespace,
    command: Sequence[str],
    choice: Choice,
    *,
    log: Callable[[str], None],
    environ: Mapping[str, str] | None = None,
) -> int:
    """Runs the job through mpirun; returns horovodrun's exit status. Raises UsageError for bad input."""
    from horovod.runner.mpi_process import MpirunStartError, run_mpirun

    environ = dict(os.environ if environ is None else environ)
    if not command:
        raise UsageError("no command given: horovodrun --mpi -np N COMMAND [ARGS...]")
    impl = find_mpi(environ)
    job, env, notes = prepare(ns, command, environ, impl)
    argv = mpi_command.build(job)
    for note in notes:
        log(f"note: {note}")
    if ns.verbose:
        for line in verbose_lines(choice, impl, job_environment(ns, impl, environ), argv):
            log(line)
    try:
        ended = run_mpirun(argv, env, log=log)
    except MpirunStartError as error:
        log(f"error: {error}")
        return 127
    if ended.signal is not None:
        log(f"interrupted ({ended.signal_name}): mpirun was told to stop every rank")
    elif ended.returncode != 0:
        log(mpi_failure.describe(ended.returncode, ended.stderr_tail))
    return ended.exit_code
