"""``horovodrun``: the command-line launcher.

Exit status: the first failing rank's exit code (128 + N when it was killed by signal N), 0 when
every rank succeeded, 2 for bad usage (including features not supported yet), 130 / 143 / 129
when interrupted by SIGINT / SIGTERM / SIGHUP (after stopping every rank).
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from horovod.runner import cli
from horovod.runner.errors import UsageError

if TYPE_CHECKING:
    from horovod.runner.elastic.settings import ElasticSettings

PROG = "horovodrun"


class _Terminated(BaseException):
    """SIGTERM or SIGHUP reached the launcher (raised in the main thread, like KeyboardInterrupt)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _log(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def _raise_terminated(signum: int, frame: object) -> None:
    raise _Terminated(signum)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """horovodrun's arguments (``sys.argv[1:]`` by default) as Horovod's ``parse_args`` gives them:
    an ``argparse.Namespace`` with Horovod's attribute names (``num_proc``, ``min_num_proc``,
    ``log_with_timestamp``..., ``run_func`` and ``executable`` None), ``--config-file`` applied.

    Like Horovod's, it exits: with status 2 and a message on bad input, and with status 0 after
    printing what ``--check-build`` (or hvd's ``--list-plugins``) asks for.
    """
    ns = cli.parse(argv)  # exits with status 2 on a malformed flag
    from horovod.runner import settings

    try:
        for warning in settings.apply_config_file(ns):
            _log(f"warning: {warning}")
    except UsageError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr, flush=True)
        sys.exit(2)
    ns.run_func = None  # Horovod's: horovod.run's function, None for a command line
    ns.executable = None
    if ns.check_build or ns.list_plugins:
        from horovod.common.plugin_api import PluginError
        from horovod.runner.check_build import check_build_text, list_plugins_text

        try:
            sys.stdout.write(check_build_text() if ns.check_build else list_plugins_text())
        except PluginError as error:
            print(f"{PROG}: error: {error}", file=sys.stderr, flush=True)
            sys.exit(1)
        sys.exit(0)
    return ns


def run_commandline() -> None:
    """Runs horovodrun with ``sys.argv``, as Horovod's function of this name does: returns when
    every rank succeeded, else exits with the job's status (see :func:`main`)."""
    status = main()
    if status != 0:
        sys.exit(status)


def main(argv: Sequence[str] | None = None) -> int:
    """horovodrun's entry point: runs the job ``argv`` describes and returns its exit status."""
    ns = parse_args(argv)
    if ns.log_level:
        # The launcher's own logging too (the rendezvous server logs requests at DEBUG; never secrets).
        levels = {"TRACE": logging.DEBUG, "FATAL": logging.CRITICAL}
        logging.basicConfig(level=levels.get(ns.log_level, getattr(logging, ns.log_level)))
    from horovod.common.plugin_api import PluginError
    from horovod.runner import settings

    try:
        _note_inactive_flags(ns)
        command = list(ns.command)
        if command and command[0] == "--":
            command = command[1:]
        # When the controller is MPI, mpirun starts the ranks (mpi_run.py); otherwise horovodrun does.
        from horovod.runner import controller, mpi_run

        choice = controller.choose(ns)
        if choice.mpi:
            return mpi_run.launch(ns, command, choice, log=_log)
        job_settings: settings.JobSettings | ElasticSettings
        if settings.is_elastic(ns):
            from horovod.runner.elastic import settings as elastic_settings

            job_settings = elastic_settings.from_namespace(ns)
        else:
            job_settings = settings.from_namespace(ns)
        if not command:
            raise UsageError(f"no command given: {PROG} -np N COMMAND [ARGS...]")
    except UsageError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr, flush=True)
        return 2
    except PluginError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr, flush=True)
        return 1

    from horovod.runner.host_check import HostCheckError
    from horovod.runner.job import run_job
    from horovod.runner.local import LaunchError

    # `kill -USR1 <launcher pid>` prints every thread's stack to stderr: what a launcher that does
    # not end is waiting for.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    previous = {}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        previous[signum] = signal.signal(signum, _raise_terminated)
    try:
        if not isinstance(job_settings, settings.JobSettings):
            from horovod.runner.elastic.job import run_elastic_job

            return run_elastic_job(job_settings, command, log=_log)
        outcome = run_job(job_settings, command, log=_log)
    except UsageError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr, flush=True)
        return 2
    except HostCheckError as error:
        _log(f"error: {error}")
        return 1
    except LaunchError as error:
        _log(f"error: {error}")
        return 127 if isinstance(error.__cause__, FileNotFoundError) else 1
    except KeyboardInterrupt:
        _log("interrupted (SIGINT): every rank was stopped")
        return 128 + signal.SIGINT
    except _Terminated as stop:
        _log(f"terminated ({signal.Signals(stop.signum).name}): every rank was stopped")
        return 128 + stop.signum
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return outcome.exit_code


def _note_inactive_flags(ns: argparse.Namespace) -> None:
    """Says so for a flag whose variable nothing installed reads. (The ranks' hvd-core names each
    ``HOROVOD_*`` knob it does not act on; ``--tcp`` sets NCCL's own variable.)"""
    if ns.tcp_flag:
        from horovod.common.plugin_api import get_plugin_manager

        if "nccl" not in get_plugin_manager().backends():
            _log(
                "note: --tcp has no effect: it sets NCCL_IB_DISABLE=1, which only NCCL reads, and no NCCL "
                "backend is installed (hvd's CPU backends use no InfiniBand verbs)"
            )


if __name__ == "__main__":
    sys.exit(main())
