"""horovod.tensorflow: Horovod's TensorFlow API on hvd's engine (``import horovod.tensorflow as hvd``).

Attributes load on first use, so that hvd-core's plugin manager can import
``horovod.tensorflow.hooks`` without importing TensorFlow; ``hvd.init``, ``hvd.allreduce``,
``hvd.DistributedGradientTape`` and the rest behave as in Horovod.
"""

from __future__ import annotations

from horovod.common.plugin_api import lazy_exports
from horovod.tensorflow.version import __version__

_EXPORTS = {
    "horovod.common.framework_api": (
        # job and build questions (hvd-core's), and the errors and process sets of the API
        "init shutdown is_initialized size rank local_size local_rank cross_size cross_rank is_homogeneous "
        "mpi_threads_supported mpi_built mpi_enabled gloo_built gloo_enabled nccl_built cuda_built rocm_built "
        "ddl_built ccl_built start_timeline stop_timeline "
        "Average Sum Adasum Min Max Product handle_average_backwards_compatibility "
        "ProcessSet global_process_set add_process_set remove_process_set "
        "HorovodInternalError HostsUpdatedInterrupt CollectiveMismatchError"
    ),
    "mpi_ops": ("size_op rank_op local_size_op local_rank_op process_set_included_op join barrier"),
    "collectives": (
        "allreduce grouped_allreduce allgather grouped_allgather broadcast broadcast_ alltoall reducescatter "
        "grouped_reducescatter"
    ),
    "compression": "Compression",
    "functions": (
        "broadcast_variables broadcast_global_variables BroadcastGlobalVariablesHook broadcast_object "
        "broadcast_object_fn allgather_object"
    ),
    "gradient_tape": "DistributedGradientTape PartialDistributedGradientTape",
    "optimizer": "DistributedOptimizer",
    "sync_batch_norm": "SyncBatchNormalization",
    # Horovod's module imported these from its util, and scripts reach them as hvd.<name>.
    "util": "vars_to_refs refs_to_vars check_num_rank_power_of_2",
}
_SUBMODULES = (
    "bridge",
    "collectives",
    "compression",
    "elastic",
    "functions",
    "gradient_tape",
    "gradients",
    "mpi_ops",
    "native",
    "optimizer",
    "sync_batch_norm",
    "util",
)

__getattr__, __dir__, _names = lazy_exports(
    "horovod.tensorflow",
    globals(),
    _EXPORTS,
    _SUBMODULES,
    framework="tensorflow",
    install_hint="pip install tensorflow (or tensorflow-cpu), 2.16 or newer",
)
__all__ = ["__version__", *_names]
