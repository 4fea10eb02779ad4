"""mpi4py communicators as hvd's world: ``hvd.init(comm=subcomm)``.

Each communicator passed to ``init(comm=...)`` becomes an independent Horovod job among its
members (Horovod's documented mpi4py interop): hvd's ranks are the communicator's ranks.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from horovod.common.plugin_api import ExternalWorld


def is_mpi4py_comm(obj: Any) -> bool:
    """Whether ``obj`` is an mpi4py communicator (without importing mpi4py: one made exists only
    if mpi4py.MPI was imported)."""
    mpi = sys.modules.get("mpi4py.MPI")
    return mpi is not None and isinstance(obj, mpi.Comm)


def world_of(comm: Any, env: Mapping[str, str]) -> ExternalWorld:
    """Makes the mpi4py communicator ``comm`` the backend's world; this process's place in it.

    Collective over ``comm``'s members, as ``init()`` is.
    """
    from mpi4py import MPI

    from horovod.backends.mpi import runtime

    if comm == MPI.COMM_NULL:
        raise ValueError("init(comm=MPI.COMM_NULL): this process is not a member of that communicator")
    if isinstance(comm, MPI.Intercomm):
        raise ValueError("init(comm=<mpi4py Intercomm>): hvd's world must be an intracommunicator (e.g. from Split)")
    _check_same_mpi(MPI.Get_library_version(), runtime.library_version())
    runtime.initialize(env)  # MPI is initialised (by mpi4py): this only checks its thread level
    runtime.select_world(comm.py2f())
    return ExternalWorld(runtime.topology(of_selected_world=True), backend="mpi")


def ranks_in_world(comm: Any, world: Any, backend: str) -> list[int]:
    """The ranks, in hvd's world, of the members of ``comm`` (Horovod's ``ProcessSet(comm)``).

    ``world`` is what ``init()`` was given: None (MPI_COMM_WORLD), a sorted list of its ranks, or a
    communicator. Only the MPI backend shares MPI's ranks with hvd's world.
    """
    from mpi4py import MPI

    if backend != "mpi":
        raise ValueError(
            f"ProcessSet(<mpi4py communicator>) needs the MPI backend (the job started by mpirun), not {backend!r}"
        )
    if comm == MPI.COMM_NULL:
        raise ValueError("ProcessSet(MPI.COMM_NULL): this process is not a member of that communicator")
    if is_mpi4py_comm(world):
        world_group, positions = world.Get_group(), None
    else:
        world_group = MPI.COMM_WORLD.Get_group()
        positions = None if world is None else {r: i for i, r in enumerate(world)}
    members = comm.Get_group().Translate_ranks(list(range(comm.Get_size())), world_group)
    if any(r == MPI.UNDEFINED for r in members):
        raise ValueError(f"ProcessSet(<communicator of {comm.Get_size()} ranks>): not every member is in hvd's world")
    if positions is not None:
        if any(r not in positions for r in members):
            raise ValueError(f"ProcessSet(<communicator>): ranks {members} are not all in init(comm={list(world)})")
        members = [positions[r] for r in members]
    return sorted(int(r) for r in members)


def _check_same_mpi(mpi4py_version: str, backend_version: str) -> None:
    """Two MPI libraries in one process cannot share a communicator: refuse clearly."""

    # Open MPI counts the terminating NUL in the length it reports, which mpi4py keeps.
    def clean(text: str) -> str:
        return text.replace("\x00", "").strip()

    if clean(mpi4py_version) != clean(backend_version):

        def first(text: str) -> str:
            return clean(text).splitlines()[0] if clean(text) else "unknown"

        raise ValueError(
            f"init(comm=<mpi4py communicator>): mpi4py runs on {first(mpi4py_version)!r}, but hvd-backend-mpi was "
            f"built for {first(backend_version)!r}; install both against the same MPI (e.g. rebuild hvd-backend-mpi "
            "in the environment where mpi4py's MPI is installed)"
        )
