"""Collectives on numpy arrays: the framework-free API that framework packages build on.

Every collective has an ``*_async`` form returning an integer handle for ``poll``/``synchronize``.
Inputs are never modified; results are new arrays (allreduce and broadcast write into a buffer
allocated here, the engine allocates results whose size is only known after negotiation).
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np

from horovod.common import _core, basics, dtypes
from horovod.common.process_sets import ProcessSet, global_process_set, process_set_id

# Reduction ops, with Horovod's numbering.
Average, Sum, Adasum, Min, Max, Product = 0, 1, 2, 3, 4, 5


def handle_average_backwards_compatibility(op: int | None, average: bool | None) -> int:
    """Maps the deprecated ``average=`` argument onto ``op`` (default: Average)."""
    if average is not None:
        if op is not None:
            raise ValueError("op and average cannot both be given; use op only (average is deprecated)")
        warnings.warn(
            "the 'average' argument is deprecated; use op=hvd.Average or op=hvd.Sum", DeprecationWarning, stacklevel=3
        )
        return Average if average else Sum
    return Average if op is None else op


def _as_buffer(array: np.ndarray) -> np.ndarray:
    """The array's bytes as a flat uint8 view, so every dtype (bfloat16, bool) crosses the same way."""
    return array.reshape(-1).view(np.uint8)


def _contiguous(tensor: Any) -> np.ndarray:
    array = np.asarray(tensor)
    if not array.flags.c_contiguous:  # (np.ascontiguousarray would also turn scalars into 1-d arrays)
        array = array.copy(order="C")
    dtypes.code_of(array.dtype)  # fail early, naming the dtype
    return array


def _engine_output(core: Any, dtype: np.dtype) -> np.ndarray:
    return np.asarray(core.output(raw=True)).view(dtype).reshape(core.output_shape)


def _submit_inplace_kind(
    op_type: int, tensor: Any, name: str, process_set: ProcessSet, **kwargs: Any
) -> int:
    """Ops whose result has the input's shape: the engine writes into an array allocated here."""
    ctx = basics.context()
    array = _contiguous(tensor)
    out = np.empty_like(array)
    core = ctx.engine.enqueue(
        op_type,
        name,
        _as_buffer(array),
        dtypes.code_of(array.dtype),
        list(array.shape),
        _as_buffer(out),
        process_set=process_set_id(process_set),
        **kwargs,
    )
    return ctx.submit(core, (array, out), lambda _core_handle: out)


def allreduce_async(
    tensor: Any,
    average: bool | None = None,
    name: str | None = None,
    op: int | None = None,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    process_set: ProcessSet = global_process_set,
    *,
    _group: tuple[int, int] = (-1, 0),
) -> int:
    op = handle_average_backwards_compatibility(op, average)
    name = name or basics.context().auto_name("allreduce")
    return _submit_inplace_kind(
        _core.OP_ALLREDUCE,
        tensor,
        name,
        process_set,
        op=op,
        prescale=prescale_factor,
        postscale=postscale_factor,
        group_id=_group[0],
        group_size=_group[1],
    )


def allreduce(tensor: Any, *args: Any, **kwargs: Any) -> np.ndarray:
    """Reduces ``tensor`` over all ranks (default op: Average) and returns the result."""
    return synchronize(allreduce_async(tensor, *args, **kwargs))


def grouped_allreduce_async(
    tensors: Sequence[Any],
    average: bool | None = None,
    name: str | None = None,
    op: int | None = None,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    process_set: ProcessSet = global_process_set,
) -> list[int]:
    """Allreduces a list of tensors as one unit: negotiated together and executed in one cycle."""
    op = handle_average_backwards_compatibility(op, average)
    ctx = basics.context()
    base = name or ctx.auto_name("grouped_allreduce")
    group = (ctx.next_group_id(), len(tensors))
    return [
        allreduce_async(t, None, f"{base}.{i}", op, prescale_factor, postscale_factor, process_set, _group=group)
        for i, t in enumerate(tensors)
    ]


def grouped_allreduce(tensors: Sequence[Any], *args: Any, **kwargs: Any) -> list[np.ndarray]:
    return [synchronize(h) for h in grouped_allreduce_async(tensors, *args, **kwargs)]


def _submit_engine_output(
    op_type: int, tensor: Any, name: str, process_set: ProcessSet, finish: Any = None, **kwargs: Any
) -> int:
    """Ops whose result size is known only after negotiation: the engine allocates it."""
    ctx = basics.context()
    array = _contiguous(tensor)
    core = ctx.engine.enqueue(
        op_type,
        name,
        _as_buffer(array),
        dtypes.code_of(array.dtype),
        list(array.shape),
        None,
        process_set=process_set_id(process_set),
        **kwargs,
    )
    dtype = array.dtype
    return ctx.submit(core, (array,), finish or (lambda h: _engine_output(h, dtype)))


def allgather_async(tensor: Any, name: str | None = None, process_set: ProcessSet = global_process_set, **kw: Any) -> int:
    name = name or basics.context().auto_name("allgather")
    return _submit_engine_output(_core.OP_ALLGATHER, tensor, name, process_set, **kw)


def allgather(tensor: Any, name: str | None = None, process_set: ProcessSet = global_process_set) -> np.ndarray:
    """Concatenates every rank's tensor along the first dimension (which may differ per rank)."""
    return synchronize(allgather_async(tensor, name, process_set))


def grouped_allgather_async(
    tensors: Sequence[Any], name: str | None = None, process_set: ProcessSet = global_process_set
) -> list[int]:
    ctx = basics.context()
    base = name or ctx.auto_name("grouped_allgather")
    group_id = ctx.next_group_id()
    return [
        allgather_async(t, f"{base}.{i}", process_set, group_id=group_id, group_size=len(tensors))
        for i, t in enumerate(tensors)
    ]


def grouped_allgather(tensors: Sequence[Any], name: str | None = None, process_set: ProcessSet = global_process_set) -> list[np.ndarray]:
    return [synchronize(h) for h in grouped_allgather_async(tensors, name, process_set)]


def broadcast_async(tensor: Any, root_rank: int, name: str | None = None, process_set: ProcessSet = global_process_set) -> int:
    name = name or basics.context().auto_name("broadcast")
    return _submit_inplace_kind(_core.OP_BROADCAST, tensor, name, process_set, root=int(root_rank))


def broadcast(tensor: Any, root_rank: int, name: str | None = None, process_set: ProcessSet = global_process_set) -> np.ndarray:
    """Returns ``root_rank``'s tensor on every rank."""
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


def alltoall_async(
    tensor: Any, splits: Any = None, name: str | None = None, process_set: ProcessSet = global_process_set
) -> int:
    name = name or basics.context().auto_name("alltoall")
    split_list = None if splits is None else [int(s) for s in np.asarray(splits).reshape(-1)]

    def finish(core: Any, dtype: np.dtype = np.asarray(tensor).dtype) -> tuple[np.ndarray, np.ndarray]:
        return _engine_output(core, dtype), np.asarray(core.received_splits, dtype=np.int32)

    return _submit_engine_output(_core.OP_ALLTOALL, tensor, name, process_set, finish, splits=split_list)


def alltoall(
    tensor: Any, splits: Any = None, name: str | None = None, process_set: ProcessSet = global_process_set
) -> tuple[np.ndarray, np.ndarray]:
    """Sends ``splits[i]`` rows (default: equal parts) to rank i; returns (received, received_splits)."""
    return synchronize(alltoall_async(tensor, splits, name, process_set))


def reducescatter_async(
    tensor: Any,
    name: str | None = None,
    op: int = Average,
    process_set: ProcessSet = global_process_set,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    *,
    _group: tuple[int, int] = (-1, 0),
) -> int:
    name = name or basics.context().auto_name("reducescatter")
    return _submit_engine_output(
        _core.OP_REDUCESCATTER,
        tensor,
        name,
        process_set,
        op=op,
        prescale=prescale_factor,
        postscale=postscale_factor,
        group_id=_group[0],
        group_size=_group[1],
    )


def reducescatter(tensor: Any, *args: Any, **kwargs: Any) -> np.ndarray:
    """Reduces over ranks and returns this rank's slice of the first dimension (uneven sizes allowed)."""
    return synchronize(reducescatter_async(tensor, *args, **kwargs))


def grouped_reducescatter_async(
    tensors: Sequence[Any],
    name: str | None = None,
    op: int = Average,
    process_set: ProcessSet = global_process_set,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
) -> list[int]:
    ctx = basics.context()
    base = name or ctx.auto_name("grouped_reducescatter")
    group = (ctx.next_group_id(), len(tensors))
    return [
        reducescatter_async(t, f"{base}.{i}", op, process_set, prescale_factor, postscale_factor, _group=group)
        for i, t in enumerate(tensors)
    ]


def grouped_reducescatter(tensors: Sequence[Any], *args: Any, **kwargs: Any) -> list[np.ndarray]:
    return [synchronize(h) for h in grouped_reducescatter_async(tensors, *args, **kwargs)]


def barrier(process_set: ProcessSet = global_process_set) -> None:
    """Blocks until every rank of the process set has reached the barrier."""
    ctx = basics.context()
    core = ctx.engine.enqueue(_core.OP_BARRIER, "barrier", None, 0, [], process_set=process_set_id(process_set))
    synchronize(ctx.submit(core, (), lambda h: None))


def join(device: int = -1) -> int:
    """Declares this rank done: until every rank has joined it contributes neutral data to the
    others' collectives. Returns the rank that joined last."""
    ctx = basics.context()
    core = ctx.engine.enqueue(_core.OP_JOIN, "join", None, 0, [])
    return synchronize(ctx.submit(core, (), lambda h: int(h.value)))


def poll(handle: int) -> bool:
    """True when the operation behind ``handle`` has completed (never blocks)."""
    return basics.context().poll(handle)


def synchronize(handle: int) -> Any:
    """Waits for the operation behind ``handle`` and returns its result (raises its error)."""
    return basics.context().synchronize(handle)
