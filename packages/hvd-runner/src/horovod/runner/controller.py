"""Which controller a job runs on, and so who starts its ranks: mpirun (MPI) or horovodrun itself.

In hvd one CPU backend is both the controller and the tensor operations, so the choice decides the
launch: the MPI backend learns rank and size from MPI and needs its ranks started by mpirun; every
other backend (Gloo first) connects through horovodrun's rendezvous server.

Precedence, first that applies:

1. the flags: ``--mpi``/``--use-mpi`` or ``--gloo`` (a config file's ``controller:`` counts as a
   flag the command line did not give);
2. the launcher's environment: ``HOROVOD_CONTROLLER``, else ``HOROVOD_CPU_OPERATIONS`` (which
   hvd-core reads first, so ``mpi`` there would make ranks ask for MPI);
3. the default: horovodrun's own launch with the installed default CPU backend, Gloo when it is
   installed, because it needs no MPI runtime. Only when the installed default is the MPI backend
   (no other CPU backend installed) is the default mpirun, the one launch that can work then.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping

from horovod.runner import worker_env
from horovod.runner.errors import UsageError

MPI = "mpi"
GLOO = "gloo"
#: Any other backend name, or none: horovodrun starts the ranks (rendezvous server).
OWN = "own"


@dataclasses.dataclass(frozen=True)
class Choice:
    #: MPI (mpirun starts the ranks) or OWN (horovodrun starts them; GLOO when asked by flag).
    launch: str
    #: Why, for --verbose and error messages ("--mpi", "HOROVOD_CONTROLLER=mpi", "default").
    reason: str

    @property
    def mpi(self) -> bool:
        return self.launch == MPI


def _from_environment(environ: Mapping[str, str]) -> Choice | None:
    controller = environ.get(worker_env.CONTROLLER, "").strip().lower()
    operations = environ.get(worker_env.CPU_OPERATIONS, "").strip().lower()
    if controller and operations and (controller == MPI) != (operations == MPI):
        # hvd has one CPU backend per job: MPI for one and not the other cannot both hold.
        raise UsageError(
            f"{worker_env.CONTROLLER}={controller} and {worker_env.CPU_OPERATIONS}={operations} disagree: "
            "hvd runs the controller and CPU operations on one backend; unset one, or pass --mpi or --gloo"
        )
    if controller:
        return Choice(MPI if controller == MPI else OWN, f"{worker_env.CONTROLLER}={controller}")
    if operations == MPI:
        return Choice(MPI, f"{worker_env.CPU_OPERATIONS}={operations}")
    return None


def _default() -> Choice:
    from horovod.common.plugin_api import PluginError, get_plugin_manager

    try:
        default = get_plugin_manager().default_backend("cpu").name
    except PluginError:
        return Choice(
            OWN, "default: horovodrun starts the ranks (no CPU backend installed; they will say what to install)"
        )
    if default == MPI:
        return Choice(MPI, "default: the MPI backend is the only CPU backend installed")
    return Choice(OWN, f"default: horovodrun starts the ranks, on the installed default backend {default}")


def choose(ns: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Choice:
    """The controller for horovodrun's flags ``ns`` (config file applied) and ``environ`` (default: ours)."""
    if environ is None:
        environ = os.environ
    if ns.use_mpi:
        return Choice(MPI, "--mpi")
    if ns.use_gloo:
        return Choice(GLOO, "--gloo")
    if ns.use_jsrun:  # refused by settings, with its own message
        return Choice(OWN, "--jsrun")
    return _from_environment(environ) or _default()
