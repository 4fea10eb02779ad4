"""horovod.torch: Horovod's PyTorch API on hvd's engine (``import horovod.torch as hvd``).

Attributes load on first use, so that hvd-core's plugin manager can import ``horovod.torch.hooks``
without importing torch; ``hvd.init``, ``hvd.allreduce`` and the rest behave as in Horovod.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from horovod.common.plugin_api import declared_exports, lazy_exports
from horovod.torch.version import __version__

# The package's exports, one list: type checkers read these imports, and declared_exports reads
# them for the lazy loading below (nothing here is imported at run time).
if TYPE_CHECKING:
    # In groups, in the order the API reference lists them (not sorted):
    # isort: off
    # job and build questions (re-exported from horovod.common)
    from horovod.torch.mpi_ops import init as init
    from horovod.torch.mpi_ops import shutdown as shutdown
    from horovod.torch.mpi_ops import is_initialized as is_initialized
    from horovod.torch.mpi_ops import size as size
    from horovod.torch.mpi_ops import rank as rank
    from horovod.torch.mpi_ops import local_size as local_size
    from horovod.torch.mpi_ops import local_rank as local_rank
    from horovod.torch.mpi_ops import cross_size as cross_size
    from horovod.torch.mpi_ops import cross_rank as cross_rank
    from horovod.torch.mpi_ops import is_homogeneous as is_homogeneous
    from horovod.torch.mpi_ops import mpi_threads_supported as mpi_threads_supported
    from horovod.torch.mpi_ops import mpi_built as mpi_built
    from horovod.torch.mpi_ops import mpi_enabled as mpi_enabled
    from horovod.torch.mpi_ops import gloo_built as gloo_built
    from horovod.torch.mpi_ops import gloo_enabled as gloo_enabled
    from horovod.torch.mpi_ops import nccl_built as nccl_built
    from horovod.torch.mpi_ops import cuda_built as cuda_built
    from horovod.torch.mpi_ops import rocm_built as rocm_built
    from horovod.torch.mpi_ops import ddl_built as ddl_built
    from horovod.torch.mpi_ops import ccl_built as ccl_built
    from horovod.torch.mpi_ops import start_timeline as start_timeline
    from horovod.torch.mpi_ops import stop_timeline as stop_timeline

    # reduction ops, process sets, errors
    from horovod.torch.mpi_ops import Average as Average
    from horovod.torch.mpi_ops import Sum as Sum
    from horovod.torch.mpi_ops import Adasum as Adasum
    from horovod.torch.mpi_ops import Min as Min
    from horovod.torch.mpi_ops import Max as Max
    from horovod.torch.mpi_ops import Product as Product
    from horovod.torch.mpi_ops import handle_average_backwards_compatibility as handle_average_backwards_compatibility
    from horovod.torch.mpi_ops import ProcessSet as ProcessSet
    from horovod.torch.mpi_ops import global_process_set as global_process_set
    from horovod.torch.mpi_ops import add_process_set as add_process_set
    from horovod.torch.mpi_ops import remove_process_set as remove_process_set
    from horovod.torch.mpi_ops import HorovodInternalError as HorovodInternalError
    from horovod.torch.mpi_ops import HostsUpdatedInterrupt as HostsUpdatedInterrupt
    from horovod.torch.mpi_ops import CollectiveMismatchError as CollectiveMismatchError
    from horovod.torch.mpi_ops import UnsupportedOperationError as UnsupportedOperationError

    # collectives
    from horovod.torch.mpi_ops import allreduce as allreduce
    from horovod.torch.mpi_ops import allreduce_ as allreduce_
    from horovod.torch.mpi_ops import allreduce_async as allreduce_async
    from horovod.torch.mpi_ops import allreduce_async_ as allreduce_async_
    from horovod.torch.mpi_ops import grouped_allreduce as grouped_allreduce
    from horovod.torch.mpi_ops import grouped_allreduce_ as grouped_allreduce_
    from horovod.torch.mpi_ops import grouped_allreduce_async as grouped_allreduce_async
    from horovod.torch.mpi_ops import grouped_allreduce_async_ as grouped_allreduce_async_
    from horovod.torch.mpi_ops import sparse_allreduce_async as sparse_allreduce_async
    from horovod.torch.mpi_ops import allgather as allgather
    from horovod.torch.mpi_ops import allgather_async as allgather_async
    from horovod.torch.mpi_ops import grouped_allgather as grouped_allgather
    from horovod.torch.mpi_ops import grouped_allgather_async as grouped_allgather_async
    from horovod.torch.mpi_ops import broadcast as broadcast
    from horovod.torch.mpi_ops import broadcast_ as broadcast_
    from horovod.torch.mpi_ops import broadcast_async as broadcast_async
    from horovod.torch.mpi_ops import broadcast_async_ as broadcast_async_
    from horovod.torch.mpi_ops import alltoall as alltoall
    from horovod.torch.mpi_ops import alltoall_async as alltoall_async
    from horovod.torch.mpi_ops import reducescatter as reducescatter
    from horovod.torch.mpi_ops import reducescatter_async as reducescatter_async
    from horovod.torch.mpi_ops import grouped_reducescatter as grouped_reducescatter
    from horovod.torch.mpi_ops import grouped_reducescatter_async as grouped_reducescatter_async
    from horovod.torch.mpi_ops import poll as poll
    from horovod.torch.mpi_ops import synchronize as synchronize
    from horovod.torch.mpi_ops import join as join
    from horovod.torch.mpi_ops import barrier as barrier
    from horovod.torch.compression import Compression as Compression
    from horovod.torch.functions import broadcast_parameters as broadcast_parameters
    from horovod.torch.functions import broadcast_optimizer_state as broadcast_optimizer_state
    from horovod.torch.objects import broadcast_object as broadcast_object
    from horovod.torch.objects import allgather_object as allgather_object
    from horovod.torch.optimizer import DistributedOptimizer as DistributedOptimizer
    from horovod.torch.sync_batch_norm import SyncBatchNorm as SyncBatchNorm
    # isort: on

_SUBMODULES = (
    "adapter",
    "async_ops",
    "autograd",
    "compression",
    "elastic",
    "functions",
    "handles",
    "mpi_ops",
    "objects",
    "optimizer",
    "sync_batch_norm",
)

__getattr__, __dir__, _names = lazy_exports(
    "horovod.torch",
    globals(),
    declared_exports(__file__),
    _SUBMODULES,
    framework="torch",
    install_hint="install the torch build for your platform (see pytorch.org), e.g. pip install torch",
)
__all__ = ["__version__", *_names]
