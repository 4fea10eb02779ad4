"""Plugin hooks of hvd-backend-mpi, loaded through the ``horovod`` entry point ``mpi``.

Kept light on purpose: hvd-core imports this module when it discovers plugins, so it imports
nothing heavy and loads no native code. MPI is touched only when a job needs it: a process started
by an MPI launcher, ``init(comm=<mpi4py communicator>)``, or the MPI backend chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from horovod.backends.mpi.version import __version__
from horovod.common.plugin_api import BackendSpec, ExternalWorld, Topology, hookimpl

NAME = "mpi"
#: Below Gloo's 100: a job horovodrun starts defaults to Gloo (MPI cannot connect processes that
#: mpirun did not start); a job mpirun starts gets MPI through hvd_external_launch.
PRIORITY = 50


def _library() -> str:
    """The library's path, asked for by the engine just before it opens the library."""
    from horovod.backends.mpi import library_path

    return library_path()


def _threads_supported() -> bool:
    """Asked by hvd.mpi_threads_supported() while this backend runs (its library is loaded then)."""
    from horovod.backends.mpi import threads_supported

    return threads_supported()


@hookimpl
def hvd_register_backends(register: Callable[[BackendSpec], None]) -> None:
    """Registers the "mpi" CPU backend (``horovodrun --mpi``, ``HOROVOD_CPU_OPERATIONS=mpi``)."""
    register(
        BackendSpec(
            name=NAME,
            library=_library,
            device_kinds=("cpu",),
            version=__version__,
            priority=PRIORITY,
            threads_supported_by=_threads_supported,
        )
    )


@hookimpl
def hvd_external_launch(env: Mapping[str, str]) -> ExternalWorld | None:
    """A job mpirun (or mpiexec, srun) started: its ranks are MPI's, connected by this backend."""
    from horovod.backends.mpi.launcher import started_by_mpi_launcher

    if not started_by_mpi_launcher(env):
        return None
    from horovod.backends.mpi import runtime

    return ExternalWorld(runtime.job_topology(env), backend=NAME)


@hookimpl
def hvd_init_world(comm: Any, job: Topology, backend: str, env: Mapping[str, str]) -> ExternalWorld | None:
    """An mpi4py communicator becomes the world; for the whole job or a list of its ranks, this
    backend (when chosen) makes its world of those MPI_COMM_WORLD ranks."""
    from horovod.backends.mpi import comms

    if comms.is_mpi4py_comm(comm):
        return comms.world_of(comm, env)
    if backend != NAME or not (comm is None or isinstance(comm, (list, tuple, range))):
        return None  # another backend's world, or an object nobody here understands (hvd-core says so)
    from horovod.backends.mpi import runtime

    runtime.initialize(env)
    runtime.select_world(ranks=comm)  # comm: None (every rank) or the sorted ranks init() was given
    return None


@hookimpl
def hvd_process_set_ranks(comm: Any, world: Any, backend: str) -> list[int] | None:
    """An mpi4py communicator given to ProcessSet(...): its members' ranks in the world init() formed."""
    from horovod.backends.mpi import comms

    if not comms.is_mpi4py_comm(comm):
        return None
    return comms.ranks_in_world(comm, world, backend)
