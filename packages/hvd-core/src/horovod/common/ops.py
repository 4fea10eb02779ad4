"""Collectives on numpy arrays: the framework-free API that the test kit and examples use.

Inputs are never modified; results are new arrays. Every collective has an ``*_async`` form that
returns an integer handle for ``poll``/``synchronize``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from horovod.common import dtypes
from horovod.common.api_text import shared_parameters
from horovod.common.collectives import (  # noqa: F401  (re-exported API)
    _NO_GROUP,
    Adasum,
    Average,
    Collectives,
    Max,
    Min,
    Product,
    Sum,
    barrier,
    handle_average_backwards_compatibility,
    join,
    poll,
    synchronize,
)
from horovod.common.exceptions import UnsupportedOperationError
from horovod.common.process_sets import ProcessSet, global_process_set

if TYPE_CHECKING:
    from horovod.common._core import Handle

# The reductions this release runs, by collective. The engine refuses the others too, with a plain
# ValueError; checking first raises UnsupportedOperationError instead (also a RuntimeError, which is
# what Horovod raised for them).
ALLREDUCE_OPS = (Average, Sum, Adasum, Min, Max, Product)
REDUCESCATTER_OPS = (Average, Sum)
_OP_NAMES = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max", Product: "Product"}


def check_reduce_op(op: int, what: str, supported: Sequence[int] = ALLREDUCE_OPS) -> None:
    """Raises UnsupportedOperationError unless ``op`` is one of ``supported`` (default: every op
    allreduce runs); ``what`` names the operation in the message.

    :param op: the reduction asked for (``Average``, ``Sum``, ...).
    :param what: the operation's name, for the error message.
    :param supported: the reductions allowed (default ``ALLREDUCE_OPS``; ``REDUCESCATTER_OPS`` for reducescatter).
    :raises UnsupportedOperationError: when ``op`` is not in ``supported``.
    """
    if op not in supported:  # (the fast path: every allreduce a framework submits passes here)
        raise UnsupportedOperationError(_unsupported_message(op, what, supported))


def _unsupported_message(op: int, what: str, supported: Sequence[int]) -> str:
    choices = " and ".join(f"op={_OP_NAMES[o]}" for o in supported)
    return f"{what} supports {choices}, got op={_OP_NAMES.get(op, op)}"


class NumpyAdapter:
    """numpy arrays cross as flat byte views, so every dtype (bfloat16, bool) travels the same way."""

    def prepare(self, tensor: Any) -> np.ndarray:
        """The input as a C-contiguous array (copied only when it is not one already).

        :param tensor: what the user passed: an array, or anything ``numpy.asarray`` takes.
        """
        array = np.asarray(tensor)
        if not array.flags.c_contiguous:  # (np.ascontiguousarray would also turn scalars into 1-d)
            array = array.copy(order="C")
        return array

    def describe(self, array: np.ndarray) -> tuple[int, list[int], int]:
        """(engine dtype code, shape, ``DEVICE_CPU``) of ``array``; ``ValueError`` for a dtype the
        engine does not carry.

        :param array: a C-contiguous array ``prepare`` returned.
        """
        from horovod.common import _core

        return dtypes.code_of(array.dtype), list(array.shape), _core.DEVICE_CPU

    def buffer(self, array: np.ndarray) -> np.ndarray:
        """A flat byte view of ``array``, sharing its memory.

        :param array: a C-contiguous array ``prepare`` or ``empty_like`` returned.
        """
        return array.reshape(-1).view(np.uint8)

    def empty_like(self, array: np.ndarray) -> np.ndarray:
        """A new uninitialised array of ``array``'s shape and dtype.

        :param array: the prepared input the result is shaped after.
        """
        return np.empty_like(array)

    def from_engine(self, core_handle: Handle, like: np.ndarray) -> np.ndarray:
        """The engine-allocated result of a completed operation, as an array of ``like``'s dtype.

        :param core_handle: the engine's handle of the completed operation.
        :param like: the prepared input, whose dtype the result takes.
        """
        return np.asarray(core_handle.output(raw=True)).view(like.dtype).reshape(core_handle.output_shape)

    def copy_into(self, target: np.ndarray, source: np.ndarray) -> np.ndarray:
        """Copies ``source`` into ``target`` and returns ``target``.

        :param target: the array written to.
        :param source: the array holding the result.
        """
        target[...] = source
        return target


class _CheckedCollectives(Collectives):
    """Collectives that refuse an unsupported reduction before submitting it (check_reduce_op).
    Every allreduce goes through submit_allreduce, every reducescatter through reducescatter_async."""

    def submit_allreduce(
        self,
        tensor: Any,
        name: str | None,
        op: int,
        prescale_factor: float = 1.0,
        postscale_factor: float = 1.0,
        process_set: ProcessSet = global_process_set,
        inplace: bool = False,
        group: tuple[int, int] = _NO_GROUP,
    ) -> int:
        check_reduce_op(op, "allreduce")
        return super().submit_allreduce(
            tensor, name, op, prescale_factor, postscale_factor, process_set, inplace, group
        )

    def reducescatter_async(
        self,
        tensor: Any,
        name: str | None = None,
        op: int = Average,
        process_set: ProcessSet = global_process_set,
        prescale_factor: float = 1.0,
        postscale_factor: float = 1.0,
        group: tuple[int, int] = _NO_GROUP,
    ) -> int:
        check_reduce_op(op, "reducescatter", REDUCESCATTER_OPS)
        return super().reducescatter_async(tensor, name, op, process_set, prescale_factor, postscale_factor, group)


_numpy = _CheckedCollectives(NumpyAdapter())

allreduce_async = _numpy.allreduce_async
grouped_allreduce_async = _numpy.grouped_allreduce_async
allgather_async = _numpy.allgather_async
grouped_allgather_async = _numpy.grouped_allgather_async
broadcast_async = _numpy.broadcast_async
reducescatter_async = _numpy.reducescatter_async
grouped_reducescatter_async = _numpy.grouped_reducescatter_async


def allreduce(tensor: Any, *args: Any, **kwargs: Any) -> np.ndarray:
    """Reduces ``tensor`` over all ranks (default op: Average) and returns the result.

    :param tensor: a numpy array (or anything ``numpy.asarray`` takes); it is not modified.
    :param args: further arguments of :func:`allreduce_async`, in its order: ``average``, ``name``, ``op``,
        ``prescale_factor``, ``postscale_factor``, ``process_set``.
    :param kwargs: those arguments by keyword (see :func:`allreduce_async`).
    """
    result: np.ndarray = synchronize(allreduce_async(tensor, *args, **kwargs))
    return result


def grouped_allreduce(tensors: Sequence[Any], *args: Any, **kwargs: Any) -> list[np.ndarray]:
    """Allreduces each of ``tensors`` as one group; returns the reduced arrays, in order.

    :param tensors: the arrays reduced as one group (negotiated and run together).
    :param args: further arguments of :func:`grouped_allreduce_async`, in its order: ``average``, ``name``, ``op``,
        ``prescale_factor``, ``postscale_factor``, ``process_set``.
    :param kwargs: those arguments by keyword.
    """
    return [synchronize(h) for h in grouped_allreduce_async(tensors, *args, **kwargs)]


@shared_parameters
def allgather(tensor: Any, name: str | None = None, process_set: ProcessSet = global_process_set) -> np.ndarray:
    """Concatenates every rank's tensor along the first dimension (which may differ per rank).

    :param tensor: a numpy array (or anything ``numpy.asarray`` takes); it is not modified. Its first dimension may
        differ between ranks.
    :param name: |shared|
    :param process_set: |shared|
    """
    result: np.ndarray = synchronize(allgather_async(tensor, name, process_set))
    return result


@shared_parameters
def grouped_allgather(
    tensors: Sequence[Any], name: str | None = None, process_set: ProcessSet = global_process_set
) -> list[np.ndarray]:
    """Allgathers each of ``tensors`` as one group; returns the gathered arrays, in order.

    :param tensors: the arrays gathered as one group.
    :param name: |shared:group_name|
    :param process_set: |shared|
    """
    return [synchronize(h) for h in grouped_allgather_async(tensors, name, process_set)]


@shared_parameters
def broadcast(
    tensor: Any, root_rank: int, name: str | None = None, process_set: ProcessSet = global_process_set
) -> np.ndarray:
    """Returns ``root_rank``'s tensor on every rank.

    :param tensor: a numpy array (or anything ``numpy.asarray`` takes); it is not modified. The root's is sent; the
        others' give the shape and dtype.
    :param root_rank: |shared|
    :param name: |shared|
    :param process_set: |shared|
    """
    result: np.ndarray = synchronize(broadcast_async(tensor, root_rank, name, process_set))
    return result


@shared_parameters
def alltoall_async(
    tensor: Any, splits: Any = None, name: str | None = None, process_set: ProcessSet = global_process_set
) -> int:
    """Starts an alltoall (see :func:`alltoall`); returns a handle, whose result is
    ``(received, received_splits)``.

    :param tensor: a numpy array (or anything ``numpy.asarray`` takes); it is not modified.
    :param splits: how many slices (along the first dimension) go to each rank of the set, in rank order; they must sum
        to the first dimension. By default the tensor is split into equal parts, one per rank (its first dimension must
        then divide evenly).
    :param name: |shared|
    :param process_set: |shared|
    """
    return _numpy.alltoall_async(tensor, splits, name, process_set)


@shared_parameters
def alltoall(
    tensor: Any, splits: Any = None, name: str | None = None, process_set: ProcessSet = global_process_set
) -> tuple[np.ndarray, np.ndarray]:
    """Sends ``splits[i]`` rows (default: equal parts) to rank i; returns (received, received_splits).

    :param tensor: a numpy array (or anything ``numpy.asarray`` takes); it is not modified.
    :param splits: how many slices (along the first dimension) go to each rank of the set, in rank order; they must sum
        to the first dimension. By default the tensor is split into equal parts, one per rank (its first dimension must
        then divide evenly).
    :param name: |shared|
    :param process_set: |shared|
    """
    received, received_splits = synchronize(alltoall_async(tensor, splits, name, process_set))
    return received, np.asarray(received_splits, dtype=np.int32)


def reducescatter(tensor: Any, *args: Any, **kwargs: Any) -> np.ndarray:
    """Reduces over ranks and returns this rank's slice of the first dimension (uneven sizes allowed).

    :param tensor: a numpy array (or anything ``numpy.asarray`` takes); it is not modified.
    :param args: further arguments of :func:`reducescatter_async`, in its order: ``name``, ``op``, ``process_set``,
        ``prescale_factor``, ``postscale_factor``.
    :param kwargs: those arguments by keyword.
    """
    result: np.ndarray = synchronize(reducescatter_async(tensor, *args, **kwargs))
    return result


def grouped_reducescatter(tensors: Sequence[Any], *args: Any, **kwargs: Any) -> list[np.ndarray]:
    """Reducescatters each of ``tensors`` as one group; returns this rank's slices, in order.

    :param tensors: the arrays reduced and scattered as one group.
    :param args: further arguments of :func:`grouped_reducescatter_async`, in its order: ``name``, ``op``,
        ``process_set``, ``prescale_factor``, ``postscale_factor``.
    :param kwargs: those arguments by keyword.
    """
    return [synchronize(h) for h in grouped_reducescatter_async(tensors, *args, **kwargs)]
