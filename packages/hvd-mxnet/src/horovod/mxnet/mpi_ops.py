"""Horovod's MXNet collectives on NDArrays.

Two ways to run, chosen by whether the result's shape is known before the collective runs:

- allreduce, broadcast, reducescatter (in place or not, grouped or not) are operations of MXNet's
  asynchronous engine (:mod:`horovod.mxnet.engine`): the call returns at once; the collective
  starts when MXNet has computed the inputs, and whoever reads an output waits for it (or gets its
  error as ``MXNetError``). A grouped call is one such operation over all its arrays. The engine
  reads and writes the NDArrays' own memory (no copy), except reducescatter's result, which the
  engine allocates and which is copied once into the output array.
- allgather and alltoall, whose result sizes come from the other ranks, wait for their inputs, run,
  and return NDArrays sharing the engine's result buffer (as Horovod's MXNet API, which waits
  for these too); their errors raise at the call, as classes that are both hvd's error and
  ``MXNetError`` (:mod:`horovod.mxnet.errors`).

Names: a collective without ``name`` gets one at the call, numbered in program order, so every
rank must call unnamed collectives in the same order (Horovod's rule). ``priority`` is MXNet's
engine priority for the operation (Horovod's meaning: likely to be run earlier).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from horovod.common import framework_api as api
from horovod.common.framework_api import (  # (Horovod's MXNet API re-exports these: see __all__)
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
from horovod.mxnet import engine
from horovod.mxnet.adapter import MXNetAdapter, check_ndarray, mx, numpy_view
from horovod.mxnet.errors import raising_mxnet_errors
from horovod.mxnet.raw import Raw, RawAdapter

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
    "allreduce",
    "allreduce_",
    "alltoall",
    "barrier",
    "broadcast",
    "broadcast_",
    "ccl_built",
    "cross_rank",
    "cross_size",
    "cuda_built",
    "ddl_built",
    "global_process_set",
    "gloo_built",
    "gloo_enabled",
    "grouped_allgather",
    "grouped_allreduce",
    "grouped_allreduce_",
    "grouped_reducescatter",
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
    "rank",
    "reducescatter",
    "remove_process_set",
    "rocm_built",
    "shutdown",
    "size",
    "start_timeline",
    "stop_timeline",
]

_waiting = Collectives(MXNetAdapter())  # allgather, alltoall: wait for the inputs, return NDArrays
_raw = Collectives(RawAdapter())  # inside MXNet's engine: memory as (address, size)


def _resolve_op(op: int | None, average: bool | None) -> int:
    # Called directly by each public allreduce function, so that the deprecation warning for
    # `average=` (stacklevel 4 in hvd-core) points at the user's call; an op allreduce lacks is refused here.
    resolved = handle_average_backwards_compatibility(op, average)
    api.check_reduce_op(resolved, "allreduce")
    return resolved


def _check_call(tensors: Sequence[Any], process_set: ProcessSet, what: str) -> None:
    """What can be refused on the calling rank is refused here, not later at the read."""
    api.require_initialized()
    api.set_rank(process_set)  # ValueError when not a member, or the set is not registered
    for tensor in tensors:
        check_ndarray(tensor, what)


def _empty_like(tensor: Any) -> Any:
    return mx.nd.empty(tensor.shape, ctx=tensor.context, dtype=tensor.dtype)


def _push(
    what: str,
    name: str,
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    submit: Callable[[list[Raw]], int],
    priority: int,
    finish: Callable[[Any], None] | None = None,
) -> None:
    """Pushes a collective over ``inputs`` into MXNet's engine; ``outputs`` is ``inputs`` for the
    in-place forms. ``submit`` gets each input as :class:`Raw` memory (with its output's, when the
    result has the input's shape and goes elsewhere)."""
    in_place = outputs is inputs
    same_shape = finish is None

    def start() -> int:
        if in_place or not same_shape:
            raws = [Raw(t) for t in inputs]
        else:
            raws = [Raw(t, out) for t, out in zip(inputs, outputs, strict=True)]
        return submit(raws)

    reads = () if in_place else inputs
    engine.push(reads, outputs, start, finish, f"{what} '{name}'", priority)


def _grouped_handle(parts: list[int]) -> int:
    return api.combine(parts, list)


# --- allreduce --------------------------------------------------------------------------------------


def _allreduce(
    tensors: Sequence[Any],
    outputs: Sequence[Any],
    grouped: bool,
    name: str | None,
    op: int,
    priority: int,
    prescale_factor: float,
    postscale_factor: float,
    process_set: ProcessSet,
) -> None:
    what = "grouped_allreduce" if grouped else "allreduce"
    _check_call(tensors, process_set, what)
    name = name or api.auto_name(what)
    in_place = outputs is tensors
    pre, post = float(prescale_factor), float(postscale_factor)

    def submit(raws: list[Raw]) -> int:
        if grouped:
            return _grouped_handle(
                _raw.grouped_allreduce_async(
                    raws,
                    name=name,
                    op=op,
                    prescale_factor=pre,
                    postscale_factor=post,
                    process_set=process_set,
                    inplace=in_place,
                )
            )
        return _raw.submit_allreduce(raws[0], name, op, pre, post, process_set, in_place)

    _push(what, name, tensors, outputs, submit, priority)


@shared_parameters
def allreduce(
    tensor: Any,
    average: bool | None = None,
    name: str | None = None,
    priority: int = 0,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    process_set: ProcessSet = global_process_set,
    op: int | None = None,
) -> Any:
    """Reduces ``tensor`` over all ranks (default op: Average) into a new NDArray; the input is
    not modified. Returns at once; reading the result waits for the collective.

    The tensor must have the same shape and dtype on every rank for a given ``name``.
    ``prescale_factor`` multiplies each input before the reduction, ``postscale_factor`` the result.

    :param tensor: an ``mx.nd.NDArray``, the same shape and dtype on every rank. It is not modified.
    :param average: |shared|
    :param name: |shared|
    :param priority: the priority of the operation in MXNet's engine (higher runs first; default 0).
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    :param process_set: |shared|
    :param op: |shared|
    """
    resolved = _resolve_op(op, average)
    output = _empty_like(check_ndarray(tensor, "allreduce"))
    _allreduce([tensor], [output], False, name, resolved, priority, prescale_factor, postscale_factor, process_set)
    return output


@shared_parameters
def allreduce_(
    tensor: Any,
    average: bool | None = None,
    name: str | None = None,
    priority: int = 0,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    process_set: ProcessSet = global_process_set,
    op: int | None = None,
) -> Any:
    """As :func:`allreduce`, writing the result into ``tensor`` (returned).

    :param tensor: an ``mx.nd.NDArray``, the same shape and dtype on every rank. The result is written into it.
    :param average: |shared|
    :param name: |shared|
    :param priority: the priority of the operation in MXNet's engine (higher runs first; default 0).
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    :param process_set: |shared|
    :param op: |shared|
    """
    resolved = _resolve_op(op, average)
    tensors = [tensor]
    _allreduce(tensors, tensors, False, name, resolved, priority, prescale_factor, postscale_factor, process_set)
    return tensor


@shared_parameters
def grouped_allreduce(
    tensors: Sequence[Any],
    average: bool | None = None,
    name: str | None = None,
    priority: int = 0,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    process_set: ProcessSet = global_process_set,
    op: int | None = None,
) -> list[Any]:
    """Reduces a list of NDArrays as one unit (negotiated and run together); returns new NDArrays.

    :param tensors: the NDArrays reduced as one group, each the same shape and dtype on every rank.
    :param average: |shared|
    :param name: |shared:group_name|
    :param priority: the priority of the operation in MXNet's engine (higher runs first; default 0).
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    :param process_set: |shared|
    :param op: |shared|
    """
    resolved = _resolve_op(op, average)
    tensors = list(tensors)
    if not tensors:
        return []
    outputs = [_empty_like(check_ndarray(t, "grouped_allreduce")) for t in tensors]
    _allreduce(tensors, outputs, True, name, resolved, priority, prescale_factor, postscale_factor, process_set)
    return outputs


@shared_parameters
def grouped_allreduce_(
    tensors: Sequence[Any],
    average: bool | None = None,
    name: str | None = None,
    priority: int = 0,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    process_set: ProcessSet = global_process_set,
    op: int | None = None,
) -> list[Any]:
    """As :func:`grouped_allreduce`, writing each result into its input (the list is returned).

    :param tensors: the NDArrays reduced as one group, each the same shape and dtype on every rank. Each result is
        written into its input.
    :param average: |shared|
    :param name: |shared:group_name|
    :param priority: the priority of the operation in MXNet's engine (higher runs first; default 0).
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    :param process_set: |shared|
    :param op: |shared|
    """
    resolved = _resolve_op(op, average)
    tensors = list(tensors)
    if not tensors:
        return tensors
    _allreduce(tensors, tensors, True, name, resolved, priority, prescale_factor, postscale_factor, process_set)
    return tensors


# --- broadcast --------------------------------------------------------------------------------------


def _broadcast(
    tensor: Any, output: Any, root_rank: int, name: str | None, priority: int, process_set: ProcessSet
) -> None:
    tensors = [tensor]
    _check_call(tensors, process_set, "broadcast")
    api.position_in_set(process_set, int(root_rank))  # ValueError unless the root is a member
    if not 0 <= int(root_rank) < size():
        raise ValueError(f"root_rank {root_rank} is not a rank of this job (size {size()})")
    name = name or api.auto_name("broadcast")
    in_place = output is tensor

    def submit(raws: list[Raw]) -> int:
        return _raw.broadcast_async(raws[0], int(root_rank), name=name, process_set=process_set, inplace=in_place)

    _push("broadcast", name, tensors, tensors if in_place else [output], submit, priority)


@shared_parameters
def broadcast(
    tensor: Any,
    root_rank: int,
    name: str | None = None,
    priority: int = 0,
    process_set: ProcessSet = global_process_set,
) -> Any:
    """Returns a new NDArray holding ``root_rank``'s ``tensor`` (a global rank, also on process sets).

    :param tensor: the root's NDArray is sent; on the other ranks it gives the shape and dtype.
    :param root_rank: |shared|
    :param name: |shared|
    :param priority: the priority of the operation in MXNet's engine (higher runs first; default 0).
    :param process_set: |shared|
    """
    output = _empty_like(check_ndarray(tensor, "broadcast"))
    _broadcast(tensor, output, root_rank, name, priority, process_set)
    return output


@shared_parameters
def broadcast_(
    tensor: Any,
    root_rank: int,
    name: str | None = None,
    priority: int = 0,
    process_set: ProcessSet = global_process_set,
) -> Any:
    """Overwrites ``tensor`` with ``root_rank``'s on every rank and returns it.

    :param tensor: the root's NDArray is sent; on the other ranks it gives the shape and dtype. The result is written
        into it.
    :param root_rank: |shared|
    :param name: |shared|
    :param priority: the priority of the operation in MXNet's engine (higher runs first; default 0).
    :param process_set: |shared|
    """
    _broadcast(tensor, tensor, root_rank, name, priority, process_set)
    return tensor


# --- reducescatter ----------------------------------------------------------------------------------


def _scattered_shape(tensor: Any, process_set: ProcessSet) -> tuple[int, ...]:
    """This rank's share of the first dimension: the first ``rows % size`` ranks get one more row."""
    if not tensor.shape:
        raise ValueError("reducescatter needs a tensor with at least one dimension (it splits the first)")
    rows, count = tensor.shape[0], api.set_size(process_set)
    own = api.set_rank(process_set)
    return (rows // count + (1 if own < rows % count else 0), *tensor.shape[1:])


def _copy_results(outputs: Sequence[Any]) -> Callable[[Any], None]:
    """Copies the engine's results (numpy arrays) into ``outputs``, on the completer thread."""

    def finish(results: Any) -> None:
        arrays = results if isinstance(results, list) else [results]
        for output, result in zip(outputs, arrays, strict=True):
            if tuple(result.shape) != tuple(output.shape):
                raise RuntimeError(f"reducescatter returned shape {tuple(result.shape)}, expected {output.shape}")
            numpy_view(output)[...] = result

    return finish


def _reducescatter(
    tensors: Sequence[Any],
    grouped: bool,
    op: int,
    name: str | None,
    priority: int,
    process_set: ProcessSet,
    prescale_factor: float,
    postscale_factor: float,
) -> list[Any]:
    what = "grouped_reducescatter" if grouped else "reducescatter"
    api.check_reduce_op(op, what, api.REDUCESCATTER_OPS)
    _check_call(tensors, process_set, what)
    outputs = [mx.nd.empty(_scattered_shape(t, process_set), ctx=t.context, dtype=t.dtype) for t in tensors]
    name = name or api.auto_name(what)
    pre, post = float(prescale_factor), float(postscale_factor)

    def submit(raws: list[Raw]) -> int:
        if grouped:
            return _grouped_handle(
                _raw.grouped_reducescatter_async(
                    raws, name=name, op=op, process_set=process_set, prescale_factor=pre, postscale_factor=post
                )
            )
        return _raw.reducescatter_async(
            raws[0], name=name, op=op, process_set=process_set, prescale_factor=pre, postscale_factor=post
        )

    _push(what, name, tensors, outputs, submit, priority, finish=_copy_results(outputs))
    return outputs


@shared_parameters
def reducescatter(
    tensor: Any,
    op: int = Average,
    name: str | None = None,
    priority: int = 0,
    process_set: ProcessSet = global_process_set,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
) -> Any:
    """Reduces ``tensor`` over ranks (Average or Sum) and returns this rank's slice of the first
    dimension (the first ``rows % size`` ranks get one row more).

    :param tensor: an NDArray, the same shape and dtype on every rank; its first dimension is scattered.
    :param op: |shared:reducescatter_op|
    :param name: |shared|
    :param priority: the priority of the operation in MXNet's engine (higher runs first; default 0).
    :param process_set: |shared|
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    """
    return _reducescatter([tensor], False, op, name, priority, process_set, prescale_factor, postscale_factor)[0]


@shared_parameters
def grouped_reducescatter(
    tensors: Sequence[Any],
    op: int = Average,
    name: str | None = None,
    priority: int = 0,
    process_set: ProcessSet = global_process_set,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
) -> list[Any]:
    """Reducescatter of a list of NDArrays as one unit; returns the list of this rank's slices.

    :param tensors: the NDArrays reduced and scattered as one group.
    :param op: |shared:reducescatter_op|
    :param name: |shared:group_name|
    :param priority: the priority of the operation in MXNet's engine (higher runs first; default 0).
    :param process_set: |shared|
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    """
    tensors = list(tensors)
    if not tensors:
        return []
    return _reducescatter(tensors, True, op, name, priority, process_set, prescale_factor, postscale_factor)


# --- allgather and alltoall: results sized by the other ranks ---------------------------------------


@shared_parameters
def allgather(
    tensor: Any, name: str | None = None, priority: int = 0, process_set: ProcessSet = global_process_set
) -> Any:
    """Concatenates every rank's ``tensor`` along the first dimension (which may differ between
    ranks; the others must agree). Waits for the result.

    :param tensor: an NDArray; its first dimension may differ between ranks, the others and the dtype must match.
    :param name: |shared|
    :param priority: the priority of the operation in MXNet's engine (higher runs first; default 0).
    :param process_set: |shared|
    """
    _check_call([tensor], process_set, "allgather")
    handle = _waiting.allgather_async(tensor, name=name, process_set=process_set)
    return raising_mxnet_errors(api.synchronize, handle)


@shared_parameters
def grouped_allgather(
    tensors: Sequence[Any], name: str | None = None, priority: int = 0, process_set: ProcessSet = global_process_set
) -> list[Any]:
    """Allgathers a list of NDArrays as one unit; returns the list of results.

    :param tensors: the NDArrays gathered as one group.
    :param name: |shared:group_name|
    :param priority: the priority of the operation in MXNet's engine (higher runs first; default 0).
    :param process_set: |shared|
    """
    tensors = list(tensors)
    if not tensors:
        return []
    _check_call(tensors, process_set, "grouped_allgather")
    handle = _grouped_handle(_waiting.grouped_allgather_async(tensors, name=name, process_set=process_set))
    results: list[Any] = raising_mxnet_errors(api.synchronize, handle)
    return results


@shared_parameters
def alltoall(
    tensor: Any,
    splits: Any = None,
    name: str | None = None,
    priority: int = 0,
    process_set: ProcessSet = global_process_set,
) -> Any:
    """Sends slices of ``tensor``'s first dimension to every rank and concatenates what they send.

    ``splits`` (a list, numpy array or NDArray of integers, one per rank of the set) says how many
    rows go to each rank; without it the rows are split equally. As Horovod's MXNet API, returns the
    received NDArray alone when ``splits`` is None, else ``(received, received_splits)``, the latter
    an int32 NDArray of the rows received from each rank.

    :param tensor: the NDArray whose slices (along the first dimension) are sent to the ranks.
    :param splits: how many rows go to each rank of the set, in rank order (a list or an integer NDArray, summing to the
        first dimension); by default equal parts.
    :param name: |shared|
    :param priority: the priority of the operation in MXNet's engine (higher runs first; default 0).
    :param process_set: |shared|
    """
    _check_call([tensor], process_set, "alltoall")
    split_list = None
    if splits is not None:
        if isinstance(splits, mx.nd.NDArray):
            splits = splits.asnumpy()
        split_list = api.integer_splits(splits, f"alltoall of tensor '{name or 'alltoall'}'")
    handle = _waiting.alltoall_async(tensor, split_list, name=name, process_set=process_set)
    received, received_splits = raising_mxnet_errors(api.synchronize, handle)
    if splits is None:
        return received
    return received, mx.nd.array(np.asarray(received_splits, dtype=np.int32), dtype=np.int32)


# --- tensor-free ------------------------------------------------------------------------------------


def join(device: int = -1) -> int:
    """Declares that this rank has no more data: until every rank has joined, the others'
    collectives complete without it. Waits first for this rank's collectives already pushed into
    MXNet's engine (so they are submitted before the join), then until all ranks joined; returns
    the rank that joined last. (``device`` is accepted for Horovod compatibility.)

    :param device: accepted for Horovod compatibility; not used.
    """
    mx.nd.waitall()
    last: int = raising_mxnet_errors(api.join, device)
    return last


@shared_parameters
def barrier(process_set: ProcessSet = global_process_set) -> None:
    """Blocks until every rank of ``process_set`` has reached the barrier.

    :param process_set: |shared|
    """
    raising_mxnet_errors(api.barrier, process_set)
