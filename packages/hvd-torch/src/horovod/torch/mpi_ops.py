"""Horovod's PyTorch collectives: the synchronous forms, in-place forms, and autograd.

Every collective is implemented once, in :mod:`horovod.common.collectives`; this module binds it to
torch tensors (:class:`~horovod.torch.adapter.TorchAdapter`) and gives it Horovod's torch API (the
asynchronous forms are :mod:`horovod.torch.async_ops`', re-exported here; the autograd Functions
:mod:`horovod.torch.autograd`'s):

- ``*_async`` return an integer handle for :func:`poll` / :func:`synchronize`
  (``sparse_allreduce_async``'s can also be called, as Horovod's is);
- ``*_`` forms write the result into the input tensor;
- the synchronous forms are differentiable (``torch.autograd.Function``) with Horovod's gradients,
  which are not all the local derivatives: allreduce -> allreduce with the same op and scale
  factors; allgather -> Average allreduce of the gradient, then this rank's rows; broadcast ->
  Average allreduce of the gradient, times 0 except on the root; alltoall -> alltoall back with the
  received splits; reducescatter -> allgather of the gradient times the set's size for Sum (not for
  Average), times the pre- and postscale factors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from horovod.common import framework_api as api
from horovod.common.framework_api import (  # (Horovod's torch API re-exports these: see __all__)
    Adasum,
    Average,
    CollectiveMismatchError,
    HorovodInternalError,
    HostsUpdatedInterrupt,
    Max,
    Min,
    ProcessSet,
    Product,
    Sum,
    UnsupportedOperationError,
    add_process_set,
    ccl_built,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    global_process_set,
    gloo_built,
    gloo_enabled,
    handle_average_backwards_compatibility,
    init,
    is_homogeneous,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    rank,
    remove_process_set,
    rocm_built,
    shared_parameters,
    shutdown,
    size,
    start_timeline,
    stop_timeline,
)
from horovod.torch import autograd
from horovod.torch.async_ops import (  # (re-exported: Horovod's module of this name has them)
    allgather_async,
    allreduce_async,
    allreduce_async_,
    alltoall_async,
    broadcast_async,
    broadcast_async_,
    grouped_allgather_async,
    grouped_allreduce_async,
    grouped_allreduce_async_,
    grouped_reducescatter_async,
    poll,
    reducescatter_async,
    resolve_op,
    sparse_allreduce_async,
    submit_allreduce,
    submit_grouped_allreduce,
    synchronize,
)
from horovod.torch.compression import Compression, CompressorLike

# Horovod's torch API (horovod.torch re-exports it), names from horovod.common included.
__all__ = [
    "Adasum",
    "Average",
    "CollectiveMismatchError",
    "HorovodInternalError",
    "HostsUpdatedInterrupt",
    "Max",
    "Min",
    "ProcessSet",
    "Product",
    "Sum",
    "UnsupportedOperationError",
    "add_process_set",
    "allgather",
    "allgather_async",
    "allreduce",
    "allreduce_",
    "allreduce_async",
    "allreduce_async_",
    "alltoall",
    "alltoall_async",
    "barrier",
    "broadcast",
    "broadcast_",
    "broadcast_async",
    "broadcast_async_",
    "ccl_built",
    "cross_rank",
    "cross_size",
    "cuda_built",
    "ddl_built",
    "global_process_set",
    "gloo_built",
    "gloo_enabled",
    "grouped_allgather",
    "grouped_allgather_async",
    "grouped_allreduce",
    "grouped_allreduce_",
    "grouped_allreduce_async",
    "grouped_allreduce_async_",
    "grouped_reducescatter",
    "grouped_reducescatter_async",
    "handle_average_backwards_compatibility",
    "init",
    "is_homogeneous",
    "is_initialized",
    "join",
    "local_rank",
    "local_size",
    "mpi_built",
    "mpi_enabled",
    "mpi_threads_supported",
    "nccl_built",
    "poll",
    "rank",
    "reducescatter",
    "reducescatter_async",
    "remove_process_set",
    "rocm_built",
    "shutdown",
    "size",
    "sparse_allreduce_async",
    "start_timeline",
    "stop_timeline",
    "synchronize",
]


# --- allreduce ------------------------------------------------------------------------------------


@shared_parameters
def allreduce(
    tensor: torch.Tensor,
    average: bool | None = None,
    name: str | None = None,
    compression: CompressorLike = Compression.none,
    op: int | None = None,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    process_set: ProcessSet = global_process_set,
) -> torch.Tensor:
    """Reduces ``tensor`` over all ranks and returns the result (differentiable).

    ``op``: Average (default), Sum, Min, Max, Product. ``prescale_factor`` multiplies each input
    before the reduction, ``postscale_factor`` the result. ``compression`` compresses what is sent.

    :param tensor: the tensor to reduce, the same shape and dtype on every rank (CPU or CUDA).
    :param average: |shared|
    :param name: |shared|
    :param compression: |shared|
    :param op: |shared|
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    :param process_set: |shared|
    """
    op = resolve_op(op, average)
    compressed, ctx = compression.compress(tensor)
    reduced = autograd.differentiable(
        autograd.Allreduce, [compressed], compressed, name, op, prescale_factor, postscale_factor, process_set
    )
    return compression.decompress(reduced, ctx)


@shared_parameters
def allreduce_(
    tensor: torch.Tensor,
    average: bool | None = None,
    name: str | None = None,
    op: int | None = None,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    process_set: ProcessSet = global_process_set,
) -> torch.Tensor:
    """Reduces ``tensor`` in place over all ranks and returns it.

    :param tensor: the tensor to reduce, the same shape and dtype on every rank (CPU or CUDA). The result is written
        into it.
    :param average: |shared|
    :param name: |shared|
    :param op: |shared|
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    :param process_set: |shared|
    """
    op = resolve_op(op, average)
    reduced: torch.Tensor = synchronize(
        submit_allreduce(tensor, name, op, prescale_factor, postscale_factor, process_set, True)
    )
    return reduced


@shared_parameters
def grouped_allreduce(
    tensors: Sequence[torch.Tensor],
    average: bool | None = None,
    name: str | None = None,
    compression: CompressorLike = Compression.none,
    op: int | None = None,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    process_set: ProcessSet = global_process_set,
) -> list[torch.Tensor]:
    """Reduces a list of tensors as one unit and returns the list of results (differentiable).

    :param tensors: the tensors to reduce as one group; each the same shape and dtype on every rank.
    :param average: |shared|
    :param name: |shared:group_name|
    :param compression: |shared|
    :param op: |shared|
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    :param process_set: |shared|
    """
    op = resolve_op(op, average)
    tensors = list(tensors)
    if not tensors:
        return []
    compressed, ctxs = zip(*[compression.compress(t) for t in tensors], strict=True)
    reduced = autograd.differentiable(
        autograd.GroupedAllreduce, compressed, name, op, prescale_factor, postscale_factor, process_set, *compressed
    )
    return [compression.decompress(t, ctx) for t, ctx in zip(reduced, ctxs, strict=True)]


@shared_parameters
def grouped_allreduce_(
    tensors: Sequence[torch.Tensor],
    average: bool | None = None,
    name: str | None = None,
    op: int | None = None,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    process_set: ProcessSet = global_process_set,
) -> list[torch.Tensor]:
    """Reduces a list of tensors in place as one unit and returns them.

    :param tensors: the tensors to reduce as one group; each the same shape and dtype on every rank. Each result is
        written into its tensor.
    :param average: |shared|
    :param name: |shared:group_name|
    :param op: |shared|
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    :param process_set: |shared|
    """
    op = resolve_op(op, average)
    reduced: list[torch.Tensor] = synchronize(
        submit_grouped_allreduce(tensors, name, op, prescale_factor, postscale_factor, process_set, True)
    )
    return reduced


# --- allgather ------------------------------------------------------------------------------------


@shared_parameters
def allgather(
    tensor: torch.Tensor, name: str | None = None, process_set: ProcessSet = global_process_set
) -> torch.Tensor:
    """Concatenates every rank's ``tensor`` along the first dimension (differentiable).

    All dimensions but the first must agree between ranks.

    :param tensor: the tensor to gather; its first dimension may differ between ranks, the others and the dtype must
        match.
    :param name: |shared|
    :param process_set: |shared|
    """
    gathered: torch.Tensor = autograd.differentiable(autograd.Allgather, [tensor], tensor, name, process_set)
    return gathered


@shared_parameters
def grouped_allgather(
    tensors: Sequence[torch.Tensor], name: str | None = None, process_set: ProcessSet = global_process_set
) -> list[torch.Tensor]:
    """Allgathers a list of tensors as one unit (differentiable).

    :param tensors: the tensors to gather as one group (each as for :func:`allgather`).
    :param name: |shared:group_name|
    :param process_set: |shared|
    """
    tensors = list(tensors)
    if not tensors:
        return []
    return list(autograd.differentiable(autograd.GroupedAllgather, tensors, name, process_set, *tensors))


# --- broadcast ------------------------------------------------------------------------------------


@shared_parameters
def broadcast(
    tensor: torch.Tensor, root_rank: int, name: str | None = None, process_set: ProcessSet = global_process_set
) -> torch.Tensor:
    """Returns ``root_rank``'s tensor on every rank (differentiable).

    :param tensor: the root's tensor is sent; on the other ranks it gives the shape and dtype (the same as the root's).
    :param root_rank: |shared|
    :param name: |shared|
    :param process_set: |shared|
    """
    received: torch.Tensor = autograd.differentiable(autograd.Broadcast, [tensor], tensor, root_rank, name, process_set)
    return received


@shared_parameters
def broadcast_(
    tensor: torch.Tensor, root_rank: int, name: str | None = None, process_set: ProcessSet = global_process_set
) -> torch.Tensor:
    """Overwrites ``tensor`` with ``root_rank``'s on every rank and returns it.

    :param tensor: the root's tensor is sent; on the other ranks it gives the shape and dtype (the same as the root's).
        The result is written into it.
    :param root_rank: |shared|
    :param name: |shared|
    :param process_set: |shared|
    """
    received: torch.Tensor = synchronize(broadcast_async_(tensor, root_rank, name, process_set))
    return received


# --- alltoall -------------------------------------------------------------------------------------


@shared_parameters
def alltoall(
    tensor: torch.Tensor, splits: Any = None, name: str | None = None, process_set: ProcessSet = global_process_set
) -> Any:
    """Scatters slices of ``tensor`` to every rank and gathers what they send (differentiable).

    ``splits`` (list or integer tensor, one per rank) says how many rows go to each rank; without
    it the first dimension is split equally. As in Horovod, returns the received tensor alone when
    ``splits`` is None, and ``(received tensor, received splits)`` when ``splits`` is given.

    :param tensor: the tensor whose slices (along the first dimension) are sent to the ranks.
    :param splits: how many rows go to each rank of the set, in rank order: a list or an integer tensor, summing to the
        first dimension. By default the first dimension is split into equal parts (it must divide evenly).
    :param name: |shared|
    :param process_set: |shared|
    """
    return autograd.differentiable(autograd.Alltoall, [tensor], tensor, splits, name, process_set)


# --- reducescatter --------------------------------------------------------------------------------


@shared_parameters
def reducescatter(
    tensor: torch.Tensor,
    name: str | None = None,
    compression: CompressorLike = Compression.none,
    op: int = Average,
    process_set: ProcessSet = global_process_set,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
) -> torch.Tensor:
    """Reduces over ranks and returns this rank's slice of the first dimension (differentiable).

    :param tensor: the tensor to reduce, the same shape and dtype on every rank; its first dimension is scattered.
    :param name: |shared|
    :param compression: |shared|
    :param op: |shared:reducescatter_op|
    :param process_set: |shared|
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    """
    compressed, ctx = compression.compress(tensor)
    reduced = autograd.differentiable(
        autograd.Reducescatter, [compressed], compressed, name, op, process_set, prescale_factor, postscale_factor
    )
    return compression.decompress(reduced, ctx)


@shared_parameters
def grouped_reducescatter(
    tensors: Sequence[torch.Tensor],
    name: str | None = None,
    compression: CompressorLike = Compression.none,
    op: int = Average,
    process_set: ProcessSet = global_process_set,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
) -> list[torch.Tensor]:
    """Reducescatter of a list of tensors as one unit (differentiable).

    :param tensors: the tensors to reduce and scatter as one group (each as for :func:`reducescatter`).
    :param name: |shared:group_name|
    :param compression: |shared|
    :param op: |shared:reducescatter_op|
    :param process_set: |shared|
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    """
    tensors = list(tensors)
    if not tensors:
        return []
    compressed, ctxs = zip(*[compression.compress(t) for t in tensors], strict=True)
    reduced = autograd.differentiable(
        autograd.GroupedReducescatter, compressed, name, op, process_set, prescale_factor, postscale_factor, *compressed
    )
    return [compression.decompress(t, ctx) for t, ctx in zip(reduced, ctxs, strict=True)]


# --- joining and barriers -------------------------------------------------------------------------


def join(device: int = -1) -> int:
    """Declares that this rank has no more data: until every rank has joined, the others'
    collectives complete without it (Sum and Average allreduces as if it gave zeros; the package
    README says what it contributes to each collective). Blocks until all ranks joined; returns the
    rank that joined last. (``device`` is accepted for Horovod compatibility.)

    :param device: accepted for Horovod compatibility (the device of the neutral data a joined rank contributes); not
        used.
    """
    return api.join(device)


@shared_parameters
def barrier(process_set: ProcessSet = global_process_set) -> None:
    """Blocks until every rank of ``process_set`` has reached the barrier.

    :param process_set: |shared|
    """
    api.barrier(process_set)
