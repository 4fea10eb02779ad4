"""horovod.common: the framework-free Horovod API (numpy collectives) and the engine's home.

Attributes are loaded on first use, so that importing ``horovod.common`` (as every plugin's light
``hooks.py`` does) costs nothing: the native engine and numpy load when the API is first used.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from horovod.common.version import __version__


def get_include() -> str:
    """Directory holding ``horovod/hvd_backend.h``, for building backends against the C ABI."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


def get_cmake_dir() -> str:
    """Directory holding ``HvdBackend.cmake``, for plain CMake builds of backends
    (``-DCMAKE_MODULE_PATH=...``); scikit-build-core finds it through the ``cmake.module`` entry point."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "cmake")


_EXPORTS = {
    "basics": (
        "init shutdown is_initialized size rank local_size local_rank cross_size cross_rank is_homogeneous "
        "start_timeline stop_timeline mpi_built gloo_built nccl_built cuda_built ddl_built ccl_built rocm_built "
        "mpi_enabled gloo_enabled mpi_threads_supported"
    ),
    "exceptions": "HorovodInternalError HostsUpdatedInterrupt CollectiveMismatchError",
    "process_sets": "ProcessSet global_process_set add_process_set remove_process_set",
    "ops": (
        "Average Sum Adasum Min Max Product allreduce allreduce_async grouped_allreduce grouped_allreduce_async "
        "allgather allgather_async grouped_allgather grouped_allgather_async broadcast broadcast_async alltoall "
        "alltoall_async reducescatter reducescatter_async grouped_reducescatter grouped_reducescatter_async barrier "
        "join poll synchronize handle_average_backwards_compatibility"
    ),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names.split()}

__all__ = ["get_include", "get_cmake_dir", "__version__", *_WHERE]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'horovod.common' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"horovod.common.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
