"""MPI's state in this process, through the backend library's ``hvd_mpi_*`` entry points (ctypes).

ctypes opens the very file the engine opens (``dlopen`` of one path returns one handle), so the MPI
initialised and the world selected here are what the engine's communicators are made from.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Mapping, Sequence
from ctypes import POINTER, c_char_p, c_int, c_int32, c_int64, c_size_t

from horovod.common.plugin_api import Topology

#: MPI's thread levels as the library numbers them (the same for every MPI).
THREAD_LEVELS = ("MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED", "MPI_THREAD_MULTIPLE")
THREAD_MULTIPLE = 3

_ERROR_LEN = 2048
_lock = threading.Lock()
_library: ctypes.CDLL | None = None
_job_topology: Topology | None = None


class MPIRuntimeError(RuntimeError):
    """MPI could not be initialised or set up for hvd; the message says what MPI answered."""


def _lib() -> ctypes.CDLL:
    global _library
    with _lock:
        if _library is None:
            from horovod.backends.mpi import library_path

            lib = ctypes.CDLL(library_path(), mode=os.RTLD_LOCAL | os.RTLD_NOW)  # as the engine opens it
            lib.hvd_mpi_initialize.argtypes = [c_int, c_char_p, c_size_t]
            lib.hvd_mpi_select_world.argtypes = [c_int, c_int64, POINTER(c_int32), c_int32, c_char_p, c_size_t]
            lib.hvd_mpi_topology.argtypes = [c_int, POINTER(c_int32), c_char_p, c_size_t]
            lib.hvd_mpi_library_version.argtypes = [c_char_p, c_size_t]
            for name in (
                "hvd_mpi_initialize",
                "hvd_mpi_select_world",
                "hvd_mpi_topology",
                "hvd_mpi_thread_level",
                "hvd_mpi_initialized_here",
                "hvd_mpi_library_version",
            ):
                getattr(lib, name).restype = c_int
            _library = lib
        return _library


def _call(function: str, *args: object) -> None:
    error = ctypes.create_string_buffer(_ERROR_LEN)
    status = getattr(_lib(), function)(*args, error, _ERROR_LEN)
    if status != 0:
        raise MPIRuntimeError(error.value.decode(errors="replace") or f"{function} failed with status {status}")


def threads_disabled(env: Mapping[str, str]) -> bool:
    """HOROVOD_MPI_THREADS_DISABLE: initialise MPI with MPI_THREAD_SERIALIZED, not MULTIPLE."""
    return env.get("HOROVOD_MPI_THREADS_DISABLE", "").strip().lower() in ("1", "true", "yes", "on")


def initialize(env: Mapping[str, str]) -> None:
    """Initialises MPI unless it is (mpi4py's initialisation is reused, and left to mpi4py to end)."""
    _call("hvd_mpi_initialize", int(threads_disabled(env)))


def select_world(comm_handle: int | None = None, ranks: Sequence[int] | None = None) -> None:
    """Makes hvd's world the communicator with Fortran handle ``comm_handle`` (MPI_COMM_WORLD when
    None), or only its ``ranks``. Collective over the new world's members."""
    members = list(ranks or ())
    array = (c_int32 * len(members))(*members)
    _call("hvd_mpi_select_world", int(comm_handle is not None), comm_handle or 0, array, len(members))


def topology(of_selected_world: bool) -> Topology:
    """This process's place in MPI_COMM_WORLD, or in the selected world. Collective over it."""
    out = (c_int32 * 6)()
    _call("hvd_mpi_topology", int(of_selected_world), out)
    return Topology(*out)


def job_topology(env: Mapping[str, str]) -> Topology:
    """This process's place in the MPI job (MPI_COMM_WORLD), asked of MPI once per process: the
    first call is collective, so every rank makes it (hvd.init() does, on every rank)."""
    global _job_topology
    initialize(env)
    if _job_topology is None:
        _job_topology = topology(of_selected_world=False)
    return _job_topology


def thread_level() -> int:
    """MPI's thread level (an index into THREAD_LEVELS), or -1 before MPI is initialised."""
    return int(_lib().hvd_mpi_thread_level())


def initialized_here() -> bool:
    """Whether the backend initialised MPI (and so finalises it when the process exits)."""
    return bool(_lib().hvd_mpi_initialized_here())


def library_version() -> str:
    """The MPI library's own description (MPI_Get_library_version)."""
    buf = ctypes.create_string_buffer(8192)
    _lib().hvd_mpi_library_version(buf, len(buf))
    return buf.value.decode(errors="replace").strip()
