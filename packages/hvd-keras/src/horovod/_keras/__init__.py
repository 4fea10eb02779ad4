"""The one implementation behind ``horovod.keras`` and ``horovod.tensorflow.keras`` (Keras 3).

``EXPORTS`` is what both modules offer, loaded on first use: hvd-core's basics, process sets and
errors, the collectives, DistributedOptimizer, load_model, Compression, and the ``callbacks`` and
``elastic`` submodules.
"""

from __future__ import annotations

from horovod._keras.version import __version__

EXPORTS = {
    "horovod.common.framework_api": (
        "init shutdown is_initialized size rank local_size local_rank cross_size cross_rank is_homogeneous "
        "mpi_threads_supported mpi_built mpi_enabled gloo_built gloo_enabled nccl_built cuda_built rocm_built "
        "ddl_built ccl_built start_timeline stop_timeline "
        "Average Sum Adasum Min Max Product ProcessSet global_process_set add_process_set remove_process_set "
        "HorovodInternalError HostsUpdatedInterrupt CollectiveMismatchError join barrier broadcast_object "
        "allgather_object"
    ),
    "horovod._keras.functions": "allreduce allgather broadcast reducescatter broadcast_global_variables",
    "horovod._keras.optimizer": "DistributedOptimizer PartialDistributedOptimizer",
    "horovod._keras.saving": "load_model",
    "horovod._keras.compression": "Compression",
}
SUBMODULES = ("callbacks", "elastic")

__all__ = ["EXPORTS", "SUBMODULES", "__version__"]
