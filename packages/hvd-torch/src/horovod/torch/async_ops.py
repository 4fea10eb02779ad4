"""Horovod's asynchronous torch collectives: each submits its tensors to the engine and returns a handle.

Every collective is implemented once, in :mod:`horovod.common.collectives`; this module binds it to
torch tensors (:class:`~horovod.torch.adapter.TorchAdapter`): ``*_async`` return an integer handle
for :func:`poll` / :func:`synchronize` (``sparse_allreduce_async``'s can also be called, as
Horovod's is), and ``*_async_`` write the result into the input. The synchronous forms, with
autograd, are :mod:`horovod.torch.mpi_ops`', which also re-exports these (Horovod's module of that
name has them all).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from horovod.common import framework_api as api
from horovod.common.framework_api import (
    Average,
    Collectives,
    ProcessSet,
    Sum,
    global_process_set,
    handle_average_backwards_compatibility,
    shared_parameters,
)
from horovod.torch import handles
from horovod.torch.adapter import TorchAdapter

__all__ = [
    "allgather_async",
    "allreduce_async",
    "allreduce_async_",
    "alltoall_async",
    "broadcast_async",
    "broadcast_async_",
    "grouped_allgather_async",
    "grouped_allreduce_async",
    "grouped_allreduce_async_",
    "grouped_reducescatter_async",
    "poll",
    "reducescatter_async",
    "sparse_allreduce_async",
    "synchronize",
]

# The collectives on torch tensors, which every module of horovod.torch submits through.
collectives = Collectives(TorchAdapter())


def resolve_op(op: int | None, average: bool | None) -> int:
    # Called directly by each public allreduce function, so that the deprecation warning for
    # `average=` (stacklevel 4 in hvd-core) points at the user's call; an op allreduce does not run
    # (Adasum) is refused here, before anything is submitted.
    resolved = handle_average_backwards_compatibility(op, average)
    api.check_reduce_op(resolved, "allreduce")
    return resolved


# --- allreduce ------------------------------------------------------------------------------------


# submit_allreduce(tensor, name, op, prescale_factor, postscale_factor, process_set, inplace) -> handle,
# for callers that resolved op already (resolve_op); the engine's handle is the torch handle as it is.
submit_allreduce = collectives.submit_allreduce


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
    op = resolve_op(op, average)
    return submit_allreduce(tensor, name, op, prescale_factor, postscale_factor, process_set, False)


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
    op = resolve_op(op, average)
    return submit_allreduce(tensor, name, op, prescale_factor, postscale_factor, process_set, True)


def submit_grouped_allreduce(
    tensors: Sequence[torch.Tensor],
    name: str | None,
    op: int,
    prescale_factor: float,
    postscale_factor: float,
    process_set: ProcessSet,
    inplace: bool,
) -> int:
    parts = collectives.grouped_allreduce_async(
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
    op = resolve_op(op, average)
    return submit_grouped_allreduce(tensors, name, op, prescale_factor, postscale_factor, process_set, False)


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
    op = resolve_op(op, average)
    return submit_grouped_allreduce(tensors, name, op, prescale_factor, postscale_factor, process_set, True)


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
    indices = collectives.allgather_async(
        tensor._indices().t().contiguous(), name=f"{name}.indices", process_set=process_set
    )
    values = collectives.allgather_async(tensor._values(), name=f"{name}.values", process_set=process_set)
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


# --- allgather ------------------------------------------------------------------------------------


@shared_parameters
def allgather_async(tensor: torch.Tensor, name: str | None = None, process_set: ProcessSet = global_process_set) -> int:
    """Starts concatenating every rank's ``tensor`` along the first dimension (which may differ).

    :param tensor: the tensor to gather; its first dimension may differ between ranks, the others and the dtype must
        match.
    :param name: |shared|
    :param process_set: |shared|
    """
    return handles.single(collectives.allgather_async(tensor, name=name, process_set=process_set))


@shared_parameters
def grouped_allgather_async(
    tensors: Sequence[torch.Tensor], name: str | None = None, process_set: ProcessSet = global_process_set
) -> int:
    """Starts allgathering a list of tensors as one unit; :func:`synchronize` returns the list.

    :param tensors: the tensors to gather as one group (each as for :func:`allgather`).
    :param name: |shared:group_name|
    :param process_set: |shared|
    """
    return handles.register(
        collectives.grouped_allgather_async(list(tensors), name=name, process_set=process_set), list
    )


# --- broadcast ------------------------------------------------------------------------------------


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
    return handles.single(collectives.broadcast_async(tensor, root_rank, name=name, process_set=process_set))


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
    return handles.single(
        collectives.broadcast_async(tensor, root_rank, name=name, process_set=process_set, inplace=True)
    )


# --- alltoall -------------------------------------------------------------------------------------


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
        return received, splits_tensor(received_splits, splits)

    return handles.single(collectives.alltoall_async(tensor, splits, name=name, process_set=process_set), finish)


def splits_tensor(received_splits: list[int], splits: Any) -> torch.Tensor:
    """The received splits as Horovod returns them: a tensor of the given splits' dtype when they
    were a tensor, else int32. (``as_tensor`` makes a tensor of a short list in a third of
    ``torch.tensor``'s time.)"""
    return torch.as_tensor(received_splits, dtype=splits.dtype if isinstance(splits, torch.Tensor) else torch.int32)


# --- reducescatter --------------------------------------------------------------------------------


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
        collectives.reducescatter_async(
            tensor,
            name=name,
            op=op,
            process_set=process_set,
            prescale_factor=prescale_factor,
            postscale_factor=postscale_factor,
        )
    )


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
    parts = collectives.grouped_reducescatter_async(
        list(tensors),
        name=name,
        op=op,
        process_set=process_set,
        prescale_factor=prescale_factor,
        postscale_factor=postscale_factor,
    )
    return handles.register(parts, list)


# --- handles and synchronisation ------------------------------------------------------------------


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
