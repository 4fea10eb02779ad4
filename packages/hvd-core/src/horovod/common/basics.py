"""The questions about the running job (rank, size, ...) and about what is built and enabled.

``init`` and ``shutdown`` are defined in :mod:`horovod.common.lifecycle` and importable from here as
in earlier releases.
"""

from __future__ import annotations

from horovod.common import state
from horovod.common.lifecycle import init, shutdown
from horovod.common.plugins import get_plugin_manager
from horovod.common.state import is_initialized

__all__ = [
    "ccl_built",
    "cross_rank",
    "cross_size",
    "cuda_built",
    "ddl_built",
    "gloo_built",
    "gloo_enabled",
    "init",
    "is_homogeneous",
    "is_initialized",
    "local_rank",
    "local_size",
    "mpi_built",
    "mpi_enabled",
    "mpi_threads_supported",
    "nccl_built",
    "rank",
    "rocm_built",
    "shutdown",
    "size",
    "start_timeline",
    "stop_timeline",
]


def size() -> int:
    return state.topology().size


def rank() -> int:
    return state.topology().rank


def local_size() -> int:
    return state.topology().local_size


def local_rank() -> int:
    return state.topology().local_rank


def cross_size() -> int:
    return state.topology().cross_size


def cross_rank() -> int:
    return state.topology().cross_rank


def is_homogeneous() -> bool:
    """True when every host runs the same number of ranks."""
    t = state.topology()
    return t.local_size * t.cross_size == t.size


def start_timeline(file_path: str, mark_cycles: bool = False) -> None:
    """Starts writing a Chrome-trace timeline (rank 0 writes it; other ranks do nothing)."""
    state.context().engine.start_timeline(str(file_path), mark_cycles)


def stop_timeline() -> None:
    state.context().engine.stop_timeline()


# What is built and what is enabled, answered from the registered plugins and the running engine.
def _registered(name: str) -> bool:
    return name in get_plugin_manager().backends()


def mpi_built() -> bool:
    return _registered("mpi")


def gloo_built() -> bool:
    return _registered("gloo")


def nccl_built() -> bool:
    return _registered("nccl")


def cuda_built() -> bool:
    return any("cuda" in spec.device_kinds for spec in get_plugin_manager().backends().values())


def ddl_built() -> bool:
    return False  # IBM DDL is not supported by hvd


def ccl_built() -> bool:
    return False  # oneCCL is not supported by hvd


def rocm_built() -> bool:
    return False  # no ROCm backend exists for hvd yet


def mpi_enabled() -> bool:
    return state.running_backend() == "mpi"


def gloo_enabled() -> bool:
    return state.running_backend() == "gloo"


def mpi_threads_supported() -> bool:
    """Whether MPI runs with MPI_THREAD_MULTIPLE, so that other MPI code (mpi4py) may call MPI
    while Horovod does; False when MPI is not the backend."""
    backend = state.context().backend_name  # raises before init(), as Horovod does
    if backend != "mpi":
        return False
    # The backend's own package answers through its spec: hvd-core names no backend package.
    return get_plugin_manager().backend(backend).threads_supported()
