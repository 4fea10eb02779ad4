"""horovod.mxnet: Horovod's MXNet API on hvd's engine (``import horovod.mxnet as hvd``).

Attributes load on first use, so that hvd-core's plugin manager can import ``horovod.mxnet.hooks``
without importing MXNet; ``hvd.init``, ``hvd.allreduce`` and the rest behave as in Horovod.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from horovod.common.plugin_api import declared_exports, lazy_exports
from horovod.mxnet.version import __version__

# The package's exports, one list: type checkers read these imports, and declared_exports reads
# them for the lazy loading below (nothing here is imported at run time).
if TYPE_CHECKING:
    # In groups, in the order the API reference lists them (not sorted):
    # isort: off
    # job and build questions (re-exported from horovod.common)
    from horovod.mxnet.mpi_ops import init as init
    from horovod.mxnet.mpi_ops import shutdown as shutdown
    from horovod.mxnet.mpi_ops import is_initialized as is_initialized
    from horovod.mxnet.mpi_ops import size as size
    from horovod.mxnet.mpi_ops import rank as rank
    from horovod.mxnet.mpi_ops import local_size as local_size
    from horovod.mxnet.mpi_ops import local_rank as local_rank
    from horovod.mxnet.mpi_ops import cross_size as cross_size
    from horovod.mxnet.mpi_ops import cross_rank as cross_rank
    from horovod.mxnet.mpi_ops import is_homogeneous as is_homogeneous
    from horovod.mxnet.mpi_ops import mpi_threads_supported as mpi_threads_supported
    from horovod.mxnet.mpi_ops import mpi_built as mpi_built
    from horovod.mxnet.mpi_ops import mpi_enabled as mpi_enabled
    from horovod.mxnet.mpi_ops import gloo_built as gloo_built
    from horovod.mxnet.mpi_ops import gloo_enabled as gloo_enabled
    from horovod.mxnet.mpi_ops import nccl_built as nccl_built
    from horovod.mxnet.mpi_ops import cuda_built as cuda_built
    from horovod.mxnet.mpi_ops import rocm_built as rocm_built
    from horovod.mxnet.mpi_ops import ddl_built as ddl_built
    from horovod.mxnet.mpi_ops import ccl_built as ccl_built
    from horovod.mxnet.mpi_ops import start_timeline as start_timeline
    from horovod.mxnet.mpi_ops import stop_timeline as stop_timeline

    # reduction ops, process sets, errors
    from horovod.mxnet.mpi_ops import Average as Average
    from horovod.mxnet.mpi_ops import Sum as Sum
    from horovod.mxnet.mpi_ops import Adasum as Adasum
    from horovod.mxnet.mpi_ops import Min as Min
    from horovod.mxnet.mpi_ops import Max as Max
    from horovod.mxnet.mpi_ops import Product as Product
    from horovod.mxnet.mpi_ops import handle_average_backwards_compatibility as handle_average_backwards_compatibility
    from horovod.mxnet.mpi_ops import ProcessSet as ProcessSet
    from horovod.mxnet.mpi_ops import global_process_set as global_process_set
    from horovod.mxnet.mpi_ops import add_process_set as add_process_set
    from horovod.mxnet.mpi_ops import remove_process_set as remove_process_set
    from horovod.mxnet.mpi_ops import HorovodInternalError as HorovodInternalError
    from horovod.mxnet.mpi_ops import HostsUpdatedInterrupt as HostsUpdatedInterrupt
    from horovod.mxnet.mpi_ops import CollectiveMismatchError as CollectiveMismatchError
    from horovod.mxnet.mpi_ops import UnsupportedOperationError as UnsupportedOperationError

    # collectives
    from horovod.mxnet.mpi_ops import allreduce as allreduce
    from horovod.mxnet.mpi_ops import allreduce_ as allreduce_
    from horovod.mxnet.mpi_ops import grouped_allreduce as grouped_allreduce
    from horovod.mxnet.mpi_ops import grouped_allreduce_ as grouped_allreduce_
    from horovod.mxnet.mpi_ops import allgather as allgather
    from horovod.mxnet.mpi_ops import grouped_allgather as grouped_allgather
    from horovod.mxnet.mpi_ops import broadcast as broadcast
    from horovod.mxnet.mpi_ops import broadcast_ as broadcast_
    from horovod.mxnet.mpi_ops import alltoall as alltoall
    from horovod.mxnet.mpi_ops import reducescatter as reducescatter
    from horovod.mxnet.mpi_ops import grouped_reducescatter as grouped_reducescatter
    from horovod.mxnet.mpi_ops import join as join
    from horovod.mxnet.mpi_ops import barrier as barrier
    from horovod.mxnet.objects import broadcast_object as broadcast_object
    from horovod.mxnet.objects import allgather_object as allgather_object

    # The Gluon side (written beside this core): loaded only when asked for, so the package imports
    # whether or not those modules are present.
    from horovod.mxnet.compression import Compression as Compression
    from horovod.mxnet.functions import broadcast_parameters as broadcast_parameters
    from horovod.mxnet.optimizer import DistributedOptimizer as DistributedOptimizer
    from horovod.mxnet.trainer import DistributedTrainer as DistributedTrainer
    # isort: on

_SUBMODULES = (
    "adapter",
    "compression",
    "engine",
    "errors",
    "functions",
    "mpi_ops",
    "objects",
    "optimizer",
    "raw",
    "trainer",
)

__getattr__, __dir__, _names = lazy_exports(
    "horovod.mxnet",
    globals(),
    declared_exports(__file__),
    _SUBMODULES,
    framework="mxnet",
    install_hint="pip install mxnet==1.9.1 'numpy<1.24' (MXNet 1.9.1 breaks on numpy >= 1.24)",
)
__all__ = ["__version__", *_names]
