"""horovod.common: the framework-free Horovod API (numpy collectives) and the engine's home.

Attributes are loaded on first use, so that importing ``horovod.common`` (as every plugin's light
``hooks.py`` does) costs nothing: the native engine and numpy load when the API is first used.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

from horovod.common.version import __version__

# For type checkers: the names _EXPORTS loads lazily, with their types (keep the two lists alike; ops's
# constants and tensor-free functions are imported from collectives, which ops re-exports them from).
if TYPE_CHECKING:
    from horovod.common.basics import autotune_state as autotune_state
    from horovod.common.basics import ccl_built as ccl_built
    from horovod.common.basics import cross_rank as cross_rank
    from horovod.common.basics import cross_size as cross_size
    from horovod.common.basics import cuda_built as cuda_built
    from horovod.common.basics import ddl_built as ddl_built
    from horovod.common.basics import gloo_built as gloo_built
    from horovod.common.basics import gloo_enabled as gloo_enabled
    from horovod.common.basics import init as init
    from horovod.common.basics import is_homogeneous as is_homogeneous
    from horovod.common.basics import is_initialized as is_initialized
    from horovod.common.basics import local_rank as local_rank
    from horovod.common.basics import local_size as local_size
    from horovod.common.basics import mpi_built as mpi_built
    from horovod.common.basics import mpi_enabled as mpi_enabled
    from horovod.common.basics import mpi_threads_supported as mpi_threads_supported
    from horovod.common.basics import nccl_built as nccl_built
    from horovod.common.basics import rank as rank
    from horovod.common.basics import rocm_built as rocm_built
    from horovod.common.basics import shutdown as shutdown
    from horovod.common.basics import size as size
    from horovod.common.basics import start_timeline as start_timeline
    from horovod.common.basics import stop_timeline as stop_timeline
    from horovod.common.collectives import Adasum as Adasum
    from horovod.common.collectives import Average as Average
    from horovod.common.collectives import Max as Max
    from horovod.common.collectives import Min as Min
    from horovod.common.collectives import Product as Product
    from horovod.common.collectives import Sum as Sum
    from horovod.common.collectives import barrier as barrier
    from horovod.common.collectives import (
        handle_average_backwards_compatibility as handle_average_backwards_compatibility,
    )
    from horovod.common.collectives import join as join
    from horovod.common.collectives import poll as poll
    from horovod.common.collectives import synchronize as synchronize
    from horovod.common.exceptions import CollectiveMismatchError as CollectiveMismatchError
    from horovod.common.exceptions import HorovodInternalError as HorovodInternalError
    from horovod.common.exceptions import HostsUpdatedInterrupt as HostsUpdatedInterrupt
    from horovod.common.exceptions import UnsupportedOperationError as UnsupportedOperationError
    from horovod.common.ops import allgather as allgather
    from horovod.common.ops import allgather_async as allgather_async
    from horovod.common.ops import allreduce as allreduce
    from horovod.common.ops import allreduce_async as allreduce_async
    from horovod.common.ops import alltoall as alltoall
    from horovod.common.ops import alltoall_async as alltoall_async
    from horovod.common.ops import broadcast as broadcast
    from horovod.common.ops import broadcast_async as broadcast_async
    from horovod.common.ops import grouped_allgather as grouped_allgather
    from horovod.common.ops import grouped_allgather_async as grouped_allgather_async
    from horovod.common.ops import grouped_allreduce as grouped_allreduce
    from horovod.common.ops import grouped_allreduce_async as grouped_allreduce_async
    from horovod.common.ops import grouped_reducescatter as grouped_reducescatter
    from horovod.common.ops import grouped_reducescatter_async as grouped_reducescatter_async
    from horovod.common.ops import reducescatter as reducescatter
    from horovod.common.ops import reducescatter_async as reducescatter_async
    from horovod.common.process_sets import ProcessSet as ProcessSet
    from horovod.common.process_sets import add_process_set as add_process_set
    from horovod.common.process_sets import global_process_set as global_process_set
    from horovod.common.process_sets import remove_process_set as remove_process_set


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
        "start_timeline stop_timeline autotune_state mpi_built gloo_built nccl_built cuda_built ddl_built ccl_built "
        "rocm_built "
        "mpi_enabled gloo_enabled mpi_threads_supported"
    ),
    "exceptions": "HorovodInternalError HostsUpdatedInterrupt CollectiveMismatchError UnsupportedOperationError",
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
