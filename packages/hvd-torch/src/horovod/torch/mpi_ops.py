"""Horovod's PyTorch collectives: asynchronous handles, in-place forms, and autograd.

Every collective is implemented once, in :mod:`horovod.common.collectives`; this module binds it to
torch tensors (:class:`~horovod.torch.adapter.TorchAdapter`) and gives it Horovod's torch API:

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
from typing import TYPE_CHECKING, Any

import torch
from horovod.common import framework_api as api
from horovod.common.framework_api import (  # (Horovod's torch API re-exports these: see __all__)
    Adasum,
    Average,
    CollectiveMismatchError,
    Collectives,
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
from horovod.torch import handles
from horovod.torch.adapter import TorchAdapter
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

_ops = Collectives(TorchAdapter())


def _resolve_op(op: int | None, average: bool | None) -> int:
    # Called directly by each public allreduce function, so that the deprecation warning for
    # `average=` (stacklevel 4 in hvd-core) points at the user's call; an op allreduce does not run
    # (Adasum) is refused here, before anything is submitted.
    resolved = handle_average_backwards_compatibility(op, average)
    api.check_reduce_op(resolved, "allreduce")
    return resolved


# --- allreduce --------------------------------------------------------------------------------------


# _allreduce_async(tensor, name, op, prescale_factor, postscale_factor, process_set, inplace) -> handle,
# for callers that resolved op already (_resolve_op); the engine's handle is the torch handle as it is.
_allreduce_async = _ops.submit_allreduce


@shared_parameters
def allreduce_async(
    tensor: torch.Tensor,
    average: bool | None = None,
    name: str | None = None,
    op: int | None = None,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    process_set: ProcessSet = global_process_set,
) -> int:
    """Starts reducing ``tensor`` over all ranks (default op: Average); the input is not modified.

    The tensor must have the same shape and dtype on every rank for a given ``name`` (an
    automatic name is generated when none is given, counted in program order). Returns a handle
    for :func:`poll` and :func:`synchronize`, which returns the reduced tensor.

    :param tensor: the tensor to reduce, the same shape and dtype on every rank (CPU or CUDA). It is not modified.
    :param average: |shared|
    :param name: |shared|
    :param op: |shared|
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    :param process_set: |shared|
    """
    op = _resolve_op(op, average)
    return _allreduce_async(tensor, name, op, prescale_factor, postscale_factor, process_set, False)


@shared_parameters
def allreduce_async_(
    tensor: torch.Tensor,
    average: bool | None = None,
    name: str | None = None,
    op: int | None = None,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    process_set: ProcessSet = global_process_set,
) -> int:
    """As :func:`allreduce_async`, writing the result into ``tensor``.

    :param tensor: the tensor to reduce, the same shape and dtype on every rank (CPU or CUDA). The result is written
        into it.
    :param average: |shared|
    :param name: |shared|
    :param op: |shared|
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    :param process_set: |shared|
    """
    op = _resolve_op(op, average)
    return _allreduce_async(tensor, name, op, prescale_factor, postscale_factor, process_set, True)


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
    op = _resolve_op(op, average)
    compressed, ctx = compression.compress(tensor)
    reduced = _differentiable(
        _Allreduce, [compressed], compressed, name, op, prescale_factor, postscale_factor, process_set
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
    op = _resolve_op(op, average)
    reduced: torch.Tensor = synchronize(
        _allreduce_async(tensor, name, op, prescale_factor, postscale_factor, process_set, True)
    )
    return reduced


def _grouped_allreduce_async(
    tensors: Sequence[torch.Tensor],
    name: str | None,
    op: int,
    prescale_factor: float,
    postscale_factor: float,
    process_set: ProcessSet,
    inplace: bool,
) -> int:
    parts = _ops.grouped_allreduce_async(
        list(tensors),
        name=name,
        op=op,
        prescale_factor=prescale_factor,
        postscale_factor=postscale_factor,
        process_set=process_set,
        inplace=inplace,
    )
    return handles.register(parts, list)


@shared_parameters
def grouped_allreduce_async(
    tensors: Sequence[torch.Tensor],
    average: bool | None = None,
    name: str | None = None,
    op: int | None = None,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    process_set: ProcessSet = global_process_set,
) -> int:
    """Starts reducing a list of tensors as one unit (negotiated and executed together).

    Returns one handle; :func:`synchronize` returns the list of reduced tensors.

    :param tensors: the tensors to reduce as one group; each the same shape and dtype on every rank.
    :param average: |shared|
    :param name: |shared:group_name|
    :param op: |shared|
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    :param process_set: |shared|
    """
    op = _resolve_op(op, average)
    return _grouped_allreduce_async(tensors, name, op, prescale_factor, postscale_factor, process_set, False)


@shared_parameters
def grouped_allreduce_async_(
    tensors: Sequence[torch.Tensor],
    average: bool | None = None,
    name: str | None = None,
    op: int | None = None,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    process_set: ProcessSet = global_process_set,
) -> int:
    """As :func:`grouped_allreduce_async`, writing each result into its input tensor.

    :param tensors: the tensors to reduce as one group; each the same shape and dtype on every rank. Each result is
        written into its tensor.
    :param average: |shared|
    :param name: |shared:group_name|
    :param op: |shared|
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    :param process_set: |shared|
    """
    op = _resolve_op(op, average)
    return _grouped_allreduce_async(tensors, name, op, prescale_factor, postscale_factor, process_set, True)


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
    op = _resolve_op(op, average)
    tensors = list(tensors)
    if not tensors:
        return []
    compressed, ctxs = zip(*[compression.compress(t) for t in tensors], strict=True)
    reduced = _differentiable(
        _GroupedAllreduce, compressed, name, op, prescale_factor, postscale_factor, process_set, *compressed
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
    op = _resolve_op(op, average)
    reduced: list[torch.Tensor] = synchronize(
        _grouped_allreduce_async(tensors, name, op, prescale_factor, postscale_factor, process_set, True)
    )
    return reduced


@shared_parameters
def sparse_allreduce_async(
    tensor: torch.Tensor, name: str | None, op: int, process_set: ProcessSet = global_process_set
) -> handles.CallableHandle:
    """Starts reducing a sparse COO tensor: its indices and values are allgathered (Sum or Average).

    Returns a handle that is called, as Horovod's is (``handle()``), or given to :func:`synchronize`
    (and :func:`poll`), to get a sparse tensor holding every rank's entries (duplicates not yet
    summed: call ``.coalesce()`` to sum them), values divided by the set's size for Average.

    :param tensor: a sparse COO tensor (``ValueError`` for a dense one).
    :param name: a name for the operation, the same on every rank, or ``None`` for one generated from the order of the
        calls.
    :param op: ``Average`` or ``Sum``; any other raises ``UnsupportedOperationError``.
    :param process_set: |shared|
    """
    if not tensor.is_sparse:
        raise ValueError("sparse_allreduce_async needs a sparse COO tensor; use allreduce_async for dense tensors")
    api.check_reduce_op(op, "sparse_allreduce_async", (Average, Sum))
    name = name or api.auto_name("sparse_allreduce")
    # Allgather concatenates along the first dimension: send indices as (nnz, sparse_dims).
    indices = _ops.allgather_async(tensor._indices().t().contiguous(), name=f"{name}.indices", process_set=process_set)
    values = _ops.allgather_async(tensor._values(), name=f"{name}.values", process_set=process_set)
    set_size = process_set.size()
    assert set_size is not None  # the allgathers above raised unless the set is registered and includes this rank
    shape = tensor.shape

    def finish(results: list[torch.Tensor]) -> torch.Tensor:
        gathered_indices, gathered_values = results
        if op == Average:
            gathered_values = gathered_values / set_size
        # Every rank's indices were valid for this shape: no invariant check needed.
        return torch.sparse_coo_tensor(gathered_indices.t(), gathered_values, shape, check_invariants=False)

    return handles.CallableHandle(handles.register([indices, values], finish))


# --- allgather --------------------------------------------------------------------------------------


@shared_parameters
def allgather_async(tensor: torch.Tensor, name: str | None = None, process_set: ProcessSet = global_process_set) -> int:
    """Starts concatenating every rank's ``tensor`` along the first dimension (which may differ).

    :param tensor: the tensor to gather; its first dimension may differ between ranks, the others and the dtype must
        match.
    :param name: |shared|
    :param process_set: |shared|
    """
    return handles.single(_ops.allgather_async(tensor, name=name, process_set=process_set))


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
    gathered: torch.Tensor = _differentiable(_Allgather, [tensor], tensor, name, process_set)
    return gathered


@shared_parameters
def grouped_allgather_async(
    tensors: Sequence[torch.Tensor], name: str | None = None, process_set: ProcessSet = global_process_set
) -> int:
    """Starts allgathering a list of tensors as one unit; :func:`synchronize` returns the list.

    :param tensors: the tensors to gather as one group (each as for :func:`allgather`).
    :param name: |shared:group_name|
    :param process_set: |shared|
    """
    return handles.register(_ops.grouped_allgather_async(list(tensors), name=name, process_set=process_set), list)


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
    return list(_differentiable(_GroupedAllgather, tensors, name, process_set, *tensors))


# --- broadcast --------------------------------------------------------------------------------------


@shared_parameters
def broadcast_async(
    tensor: torch.Tensor, root_rank: int, name: str | None = None, process_set: ProcessSet = global_process_set
) -> int:
    """Starts sending ``root_rank``'s tensor to every rank; the input is not modified.

    :param tensor: the root's tensor is sent; on the other ranks it gives the shape and dtype (the same as the root's).
        It is not modified.
    :param root_rank: |shared|
    :param name: |shared|
    :param process_set: |shared|
    """
    return handles.single(_ops.broadcast_async(tensor, root_rank, name=name, process_set=process_set))


@shared_parameters
def broadcast_async_(
    tensor: torch.Tensor, root_rank: int, name: str | None = None, process_set: ProcessSet = global_process_set
) -> int:
    """As :func:`broadcast_async`, writing the result into ``tensor``.

    :param tensor: the root's tensor is sent; on the other ranks it gives the shape and dtype (the same as the root's).
        The result is written into it.
    :param root_rank: |shared|
    :param name: |shared|
    :param process_set: |shared|
    """
    return handles.single(_ops.broadcast_async(tensor, root_rank, name=name, process_set=process_set, inplace=True))


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
    received: torch.Tensor = _differentiable(_Broadcast, [tensor], tensor, root_rank, name, process_set)
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


# --- alltoall ---------------------------------------------------------------------------------------


@shared_parameters
def alltoall_async(
    tensor: torch.Tensor, splits: Any = None, name: str | None = None, process_set: ProcessSet = global_process_set
) -> int:
    """Starts an alltoall: ``splits[i]`` rows of ``tensor`` go to rank i (default: equal parts).

    :func:`synchronize` returns ``(received tensor, received splits)``, the splits as an integer
    tensor (of ``splits``' dtype when it is a tensor, else int32).

    :param tensor: the tensor whose slices (along the first dimension) are sent to the ranks.
    :param splits: how many rows go to each rank of the set, in rank order: a list or an integer tensor, summing to the
        first dimension. By default the first dimension is split into equal parts (it must divide evenly).
    :param name: |shared|
    :param process_set: |shared|
    """

    def finish(result: tuple[torch.Tensor, list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        received, received_splits = result
        return received, _splits_tensor(received_splits, splits)

    return handles.single(_ops.alltoall_async(tensor, splits, name=name, process_set=process_set), finish)


def _splits_tensor(received_splits: list[int], splits: Any) -> torch.Tensor:
    """The received splits as Horovod returns them: a tensor of the given splits' dtype when they
    were a tensor, else int32. (``as_tensor`` makes a tensor of a short list in a third of
    ``torch.tensor``'s time.)"""
    return torch.as_tensor(received_splits, dtype=splits.dtype if isinstance(splits, torch.Tensor) else torch.int32)


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
    return _differentiable(_Alltoall, [tensor], tensor, splits, name, process_set)


# --- reducescatter ----------------------------------------------------------------------------------


@shared_parameters
def reducescatter_async(
    tensor: torch.Tensor,
    name: str | None = None,
    op: int = Average,
    process_set: ProcessSet = global_process_set,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
) -> int:
    """Starts reducing over ranks (Average or Sum) and scattering the first dimension: each rank
    gets its slice (the first ``rows % size`` ranks one row more).

    :param tensor: the tensor to reduce, the same shape and dtype on every rank; its first dimension is scattered.
    :param name: |shared|
    :param op: |shared:reducescatter_op|
    :param process_set: |shared|
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    """
    api.check_reduce_op(op, "reducescatter", api.REDUCESCATTER_OPS)
    return handles.single(
        _ops.reducescatter_async(
            tensor,
            name=name,
            op=op,
            process_set=process_set,
            prescale_factor=prescale_factor,
            postscale_factor=postscale_factor,
        )
    )


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
    reduced = _differentiable(
        _Reducescatter, [compressed], compressed, name, op, process_set, prescale_factor, postscale_factor
    )
    return compression.decompress(reduced, ctx)


@shared_parameters
def grouped_reducescatter_async(
    tensors: Sequence[torch.Tensor],
    name: str | None = None,
    op: int = Average,
    process_set: ProcessSet = global_process_set,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
) -> int:
    """Starts a reducescatter of a list of tensors as one unit; :func:`synchronize` returns the list.

    :param tensors: the tensors to reduce and scatter as one group (each as for :func:`reducescatter`).
    :param name: |shared:group_name|
    :param op: |shared:reducescatter_op|
    :param process_set: |shared|
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    """
    api.check_reduce_op(op, "grouped_reducescatter", api.REDUCESCATTER_OPS)
    parts = _ops.grouped_reducescatter_async(
        list(tensors),
        name=name,
        op=op,
        process_set=process_set,
        prescale_factor=prescale_factor,
        postscale_factor=postscale_factor,
    )
    return handles.register(parts, list)


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
    reduced = _differentiable(
        _GroupedReducescatter, compressed, name, op, process_set, prescale_factor, postscale_factor, *compressed
    )
    return [compression.decompress(t, ctx) for t, ctx in zip(reduced, ctxs, strict=True)]


# --- handles and synchronisation --------------------------------------------------------------------


def poll(handle: int) -> bool:
    """True when the asynchronous operation behind ``handle`` has completed (never blocks).

    :param handle: the handle an ``*_async`` function returned.
    """
    return handles.poll(handle)


def synchronize(handle: int) -> Any:
    """Waits for the asynchronous operation behind ``handle`` and returns its result.

    :param handle: the handle an ``*_async`` function returned. Each handle is synchronized once (``ValueError`` after
        that).
    """
    return handles.synchronize(handle)


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


# --- autograd ---------------------------------------------------------------------------------------
# The synchronous collectives above are these Functions; their backward passes call the same
# (differentiable) collectives, so every rank must run backward through them in the same order.
# Each declares, for type checkers only, the signature of its `apply` (torch's is untyped: it passes
# its arguments to `forward`); `ctx` is torch's per-call context, where forward keeps what backward
# needs as attributes of its own choosing (hence Any).
#
# Gradients, one per forward argument after ctx (None for the non-tensor ones).
_Grads = tuple[torch.Tensor | None, ...]


class _UnrecordedContext:
    """Takes the notes a Function's forward makes for its backward when there will be none."""

    def mark_non_differentiable(self, *tensors: torch.Tensor) -> None:
        pass


def _differentiable(function: Any, tensors: Sequence[torch.Tensor], *args: Any) -> Any:
    """``function.apply(*args)``, where autograd records it: gradients are on and one of ``tensors``
    (the inputs) requires one. Otherwise its forward alone, with the same result: recording an op
    costs tens of microseconds a call (more than the engine's own work for a small tensor on one host),
    which inference, evaluation and benchmarks need not pay. (Not a tensor: forward's adapter says
    what is wrong with it.)"""
    if torch.is_grad_enabled() and any(getattr(t, "requires_grad", False) for t in tensors):
        return function.apply(*args)
    return function.forward(_UnrecordedContext(), *args)


class _Allreduce(torch.autograd.Function):
    if TYPE_CHECKING:

        @classmethod
        def apply(
            cls,
            tensor: torch.Tensor,
            name: str | None,
            op: int,
            prescale_factor: float,
            postscale_factor: float,
            process_set: ProcessSet,
        ) -> torch.Tensor: ...

    @staticmethod
    def forward(
        ctx: Any,
        tensor: torch.Tensor,
        name: str | None,
        op: int,
        prescale_factor: float,
        postscale_factor: float,
        process_set: ProcessSet,
    ) -> torch.Tensor:
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        reduced: torch.Tensor = synchronize(
            _allreduce_async(tensor, name, op, prescale_factor, postscale_factor, process_set, False)
        )
        return reduced

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> _Grads:
        op, prescale_factor, postscale_factor, process_set = ctx.args
        grad = allreduce(
            grad_output,
            op=op,
            prescale_factor=prescale_factor,
            postscale_factor=postscale_factor,
            process_set=process_set,
        )
        return grad, None, None, None, None, None


class _GroupedAllreduce(torch.autograd.Function):
    if TYPE_CHECKING:

        @classmethod
        def apply(
            cls,
            name: str | None,
            op: int,
            prescale_factor: float,
            postscale_factor: float,
            process_set: ProcessSet,
            *tensors: torch.Tensor,
        ) -> tuple[torch.Tensor, ...]: ...

    @staticmethod
    def forward(
        ctx: Any,
        name: str | None,
        op: int,
        prescale_factor: float,
        postscale_factor: float,
        process_set: ProcessSet,
        *tensors: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        handle = _grouped_allreduce_async(tensors, name, op, prescale_factor, postscale_factor, process_set, False)
        return tuple(synchronize(handle))

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> _Grads:
        op, prescale_factor, postscale_factor, process_set = ctx.args
        grads = grouped_allreduce(
            list(grad_outputs),
            op=op,
            prescale_factor=prescale_factor,
            postscale_factor=postscale_factor,
            process_set=process_set,
        )
        return (None, None, None, None, None, *grads)


def _row_offsets(rows: list[int], process_set: ProcessSet) -> list[int]:
    """Where this rank's rows start in allgathered tensors, given its row count for each."""
    counts = grouped_allgather([torch.tensor([n], dtype=torch.int64) for n in rows], process_set=process_set)
    own = api.set_rank(process_set)
    return [int(c[:own].sum()) for c in counts]


class _Allgather(torch.autograd.Function):
    if TYPE_CHECKING:

        @classmethod
        def apply(cls, tensor: torch.Tensor, name: str | None, process_set: ProcessSet) -> torch.Tensor: ...

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, name: str | None, process_set: ProcessSet) -> torch.Tensor:
        output: torch.Tensor = synchronize(allgather_async(tensor, name, process_set))
        ctx.rows, ctx.process_set = tensor.shape[0], process_set
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> _Grads:
        reduced = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        (offset,) = _row_offsets([ctx.rows], ctx.process_set)
        return reduced.narrow(0, offset, ctx.rows), None, None


class _GroupedAllgather(torch.autograd.Function):
    if TYPE_CHECKING:

        @classmethod
        def apply(
            cls, name: str | None, process_set: ProcessSet, *tensors: torch.Tensor
        ) -> tuple[torch.Tensor, ...]: ...

    @staticmethod
    def forward(
        ctx: Any, name: str | None, process_set: ProcessSet, *tensors: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        outputs = synchronize(grouped_allgather_async(tensors, name, process_set))
        ctx.rows, ctx.process_set = [t.shape[0] for t in tensors], process_set
        return tuple(outputs)

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> _Grads:
        reduced = grouped_allreduce(list(grad_outputs), op=Average, process_set=ctx.process_set)
        offsets = _row_offsets(ctx.rows, ctx.process_set)
        return (None, None, *[g.narrow(0, o, n) for g, o, n in zip(reduced, offsets, ctx.rows, strict=True)])


class _Broadcast(torch.autograd.Function):
    if TYPE_CHECKING:

        @classmethod
        def apply(
            cls, tensor: torch.Tensor, root_rank: int, name: str | None, process_set: ProcessSet
        ) -> torch.Tensor: ...

    @staticmethod
    def forward(
        ctx: Any, tensor: torch.Tensor, root_rank: int, name: str | None, process_set: ProcessSet
    ) -> torch.Tensor:
        ctx.root_rank, ctx.process_set = root_rank, process_set
        received: torch.Tensor = synchronize(broadcast_async(tensor, root_rank, name, process_set))
        return received

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> _Grads:
        reduced = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if api.rank() != ctx.root_rank:  # a global rank, as Horovod's root_rank is
            # Times 0 (Horovod's definition), not zeros: a non-finite gradient on any rank makes
            # every rank's gradient NaN, so that all ranks see it (e.g. to skip the step alike).
            reduced = reduced * 0
        return reduced, None, None, None


class _Alltoall(torch.autograd.Function):
    if TYPE_CHECKING:

        @classmethod
        def apply(
            cls, tensor: torch.Tensor, splits: Any, name: str | None, process_set: ProcessSet
        ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]: ...

    @staticmethod
    def forward(
        ctx: Any, tensor: torch.Tensor, splits: Any, name: str | None, process_set: ProcessSet
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        output: torch.Tensor
        received: list[int]
        # The engine's own result, whose splits are a list: a tensor of them is made only when the
        # caller gets them (backward passes the list on as its splits).
        output, received = synchronize(_ops.alltoall_async(tensor, splits, name=name, process_set=process_set))
        ctx.received_splits, ctx.process_set = received, process_set
        if splits is None:
            return output
        received_splits = _splits_tensor(received, splits)
        ctx.mark_non_differentiable(received_splits)
        return output, received_splits

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor, *unused: torch.Tensor) -> _Grads:
        grad, _ = alltoall(grad_output, splits=ctx.received_splits, process_set=ctx.process_set)
        return grad, None, None, None


def _reducescatter_grad_factors(
    op: int, process_set: ProcessSet, prescale_factor: float, postscale_factor: float
) -> tuple[float, ...]:
    """What a reducescatter's backward multiplies the incoming gradient by before allgathering it,
    in order: Horovod's definition, the set's size for Sum (not for Average), then each scale factor
    that is not 1. (Applied one by one, as Horovod does, the results are the same to the bit.)"""
    factors = (float(api.set_size(process_set)) if op == Sum else 1.0, prescale_factor, postscale_factor)
    return tuple(f for f in factors if f != 1.0)


def _scaled(grad: torch.Tensor, factors: tuple[float, ...]) -> torch.Tensor:
    for factor in factors:
        grad = grad * factor
    return grad


class _Reducescatter(torch.autograd.Function):
    if TYPE_CHECKING:

        @classmethod
        def apply(
            cls,
            tensor: torch.Tensor,
            name: str | None,
            op: int,
            process_set: ProcessSet,
            prescale_factor: float,
            postscale_factor: float,
        ) -> torch.Tensor: ...

    @staticmethod
    def forward(
        ctx: Any,
        tensor: torch.Tensor,
        name: str | None,
        op: int,
        process_set: ProcessSet,
        prescale_factor: float,
        postscale_factor: float,
    ) -> torch.Tensor:
        ctx.process_set = process_set
        ctx.factors = _reducescatter_grad_factors(op, process_set, prescale_factor, postscale_factor)
        reduced: torch.Tensor = synchronize(
            reducescatter_async(tensor, name, op, process_set, prescale_factor, postscale_factor)
        )
        return reduced

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> _Grads:
        grad = allgather(_scaled(grad_output, ctx.factors), process_set=ctx.process_set)
        return grad, None, None, None, None, None


class _GroupedReducescatter(torch.autograd.Function):
    if TYPE_CHECKING:

        @classmethod
        def apply(
            cls,
            name: str | None,
            op: int,
            process_set: ProcessSet,
            prescale_factor: float,
            postscale_factor: float,
            *tensors: torch.Tensor,
        ) -> tuple[torch.Tensor, ...]: ...

    @staticmethod
    def forward(
        ctx: Any,
        name: str | None,
        op: int,
        process_set: ProcessSet,
        prescale_factor: float,
        postscale_factor: float,
        *tensors: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        ctx.process_set = process_set
        ctx.factors = _reducescatter_grad_factors(op, process_set, prescale_factor, postscale_factor)
        handle = grouped_reducescatter_async(tensors, name, op, process_set, prescale_factor, postscale_factor)
        return tuple(synchronize(handle))

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> _Grads:
        grads = grouped_allgather([_scaled(g, ctx.factors) for g in grad_outputs], process_set=ctx.process_set)
        return (None, None, None, None, None, *grads)
