"""horovod.torch: Horovod's PyTorch API on hvd's engine (``import horovod.torch as hvd``).

Attributes load on first use, so that hvd-core's plugin manager can import ``horovod.torch.hooks``
without importing torch; ``hvd.init``, ``hvd.allreduce`` and the rest behave as in Horovod.
"""

from __future__ import annotations

import importlib
from typing import Any

from horovod.torch.version import __version__

_EXPORTS = {
    "mpi_ops": (
        # job and build questions (re-exported from horovod.common)
        "init shutdown is_initialized size rank local_size local_rank cross_size cross_rank is_homogeneous "
        "mpi_threads_supported mpi_built mpi_enabled gloo_built gloo_enabled nccl_built cuda_built rocm_built "
        "ddl_built ccl_built start_timeline stop_timeline "
        # reduction ops, process sets, errors
        "Average Sum Adasum Min Max Product handle_average_backwards_compatibility "
        "ProcessSet global_process_set add_process_set remove_process_set "
        "HorovodInternalError HostsUpdatedInterrupt CollectiveMismatchError "
        # collectives
        "allreduce allreduce_ allreduce_async allreduce_async_ grouped_allreduce grouped_allreduce_ "
        "grouped_allreduce_async grouped_allreduce_async_ sparse_allreduce_async allgather allgather_async "
        "grouped_allgather grouped_allgather_async broadcast broadcast_ broadcast_async broadcast_async_ "
        "alltoall alltoall_async reducescatter reducescatter_async grouped_reducescatter "
        "grouped_reducescatter_async poll synchronize join barrier"
    ),
    "compression": "Compression",
    "functions": "broadcast_parameters broadcast_optimizer_state",
    "objects": "broadcast_object allgather_object",
    "optimizer": "DistributedOptimizer",
    "sync_batch_norm": "SyncBatchNorm",
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names.split()}
_SUBMODULES = {"adapter", "compression", "functions", "handles", "mpi_ops", "objects", "optimizer", "sync_batch_norm"}

__all__ = ["__version__", *_WHERE]


def _import(module: str) -> Any:
    try:
        return importlib.import_module(f"horovod.torch.{module}")
    except ModuleNotFoundError as error:
        if error.name == "torch":
            raise ImportError(
                "horovod.torch needs PyTorch, which is not installed: install the torch build for your "
                "platform (see pytorch.org), e.g. pip install torch"
            ) from error
        raise


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return _import(name)
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'horovod.torch' has no attribute {name!r}")
    value = getattr(_import(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*__all__, *_SUBMODULES})
