"""Horovod's TensorFlow collectives with Horovod's signatures (``hvd.allreduce`` and the rest).

``device_dense`` / ``device_sparse`` are accepted as Horovod scripts pass them; tensors are reduced
where hvd's CPU backends read them, and results come back on the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from horovod.common import framework_api as api
from horovod.common.framework_api import Average, ProcessSet, Sum, global_process_set, shared_parameters
from horovod.tensorflow import bridge, mpi_ops
from horovod.tensorflow.compression import Compression
from horovod.tensorflow.mpi_ops import engine_name
from horovod.tensorflow.variables import tf_variable


def _resolve(op: int | None, average: bool | None) -> int:
    # Called directly by each public function, so that the deprecation warning for `average=`
    # (stacklevel 4 in hvd-core) points at the user's call.
    return api.handle_average_backwards_compatibility(op, average)


def sparse_allreduce(slices: tf.IndexedSlices, name: str, op: int, process_set: ProcessSet) -> tf.IndexedSlices:
    """An allreduce of IndexedSlices: every rank's values and indices, allgathered (Horovod's way)."""
    mpi_ops.check_op(op, "allreduce of tf.IndexedSlices (sparse_as_dense=True reduces them as dense)", (Average, Sum))
    values, indices = mpi_ops.grouped_allgather_tensors([slices.values, slices.indices], name, process_set)
    if op == Average:
        values = values / tf.cast(api.set_size(process_set), values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=slices.dense_shape)


@shared_parameters
def allreduce(
    tensor: Any,
    average: bool | None = None,
    device_dense: str = "",
    device_sparse: str = "",
    compression: Any = Compression.none,
    op: int | None = None,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    name: str | None = None,
    process_set: ProcessSet = global_process_set,
    ignore_name_scope: bool = False,
) -> Any:
    """Reduces a ``tf.Tensor``, ``tf.Variable`` or ``tf.IndexedSlices`` over all ranks.

    ``op``: Average (default), Sum, Min, Max, Product. IndexedSlices are allgathered (values and
    indices), which is an allreduce of the tensor they stand for (Average divides the values).

    :param tensor: a ``tf.Tensor``, ``tf.Variable`` or ``tf.IndexedSlices`` (or anything ``tf.convert_to_tensor``
        takes), the same shape and dtype on every rank.
    :param average: |shared|
    :param device_dense: accepted for Horovod's signature (the device dense tensors are reduced on); hvd reduces on the
        CPU, where its backends read tensors, and ignores it.
    :param device_sparse: accepted for Horovod's signature (the device sparse tensors are gathered on); ignored.
    :param compression: |shared|
    :param op: the reduction: ``Average`` (the default, when ``None``), ``Sum``, ``Min``, ``Max`` or ``Product``
        (``Average`` or ``Sum`` for ``tf.IndexedSlices``), or ``Adasum`` for floating-point tensors.
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    :param name: a name for the operation, the same on every rank (inside a graph, prefixed with the current name
        scope); by default one is generated from the order of the calls.
    :param process_set: |shared|
    :param ignore_name_scope: use ``name`` as it is, without the current name scope.
    """
    op = _resolve(op, average)
    mpi_ops.check_op(op, "allreduce")
    if isinstance(tensor, tf.IndexedSlices):
        return sparse_allreduce(tensor, engine_name("allreduce", name, ignore_name_scope), op, process_set)
    tensor = bridge.as_tensor(tensor)
    compressed, ctx = compression.compress(tensor)
    reduced = mpi_ops.allreduce_tensor(
        compressed,
        engine_name("allreduce", name, ignore_name_scope),
        op,
        prescale_factor,
        postscale_factor,
        process_set,
    )
    return compression.decompress(reduced, ctx)


@shared_parameters
def grouped_allreduce(
    tensors: Sequence[Any],
    average: bool | None = None,
    device_dense: str = "",
    device_sparse: str = "",
    compression: Any = Compression.none,
    op: int | None = None,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    process_set: ProcessSet = global_process_set,
    ignore_name_scope: bool = False,
    name: str | None = None,
) -> list[Any]:
    """Reduces a list of tensors as one unit (negotiated and run together); IndexedSlices among
    them are allgathered as :func:`allreduce` does.

    :param tensors: the tensors (``tf.Tensor``, ``tf.Variable`` or ``tf.IndexedSlices``) reduced as one group.
    :param average: |shared|
    :param device_dense: accepted for Horovod's signature (the device dense tensors are reduced on); hvd reduces on the
        CPU, where its backends read tensors, and ignores it.
    :param device_sparse: accepted for Horovod's signature (the device sparse tensors are gathered on); ignored.
    :param compression: |shared|
    :param op: the reduction: ``Average`` (the default, when ``None``), ``Sum``, ``Min``, ``Max`` or ``Product``
        (``Average`` or ``Sum`` for ``tf.IndexedSlices``), or ``Adasum`` for floating-point tensors.
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    :param process_set: |shared|
    :param ignore_name_scope: use ``name`` as it is, without the current name scope.
    :param name: a name for the operation, the same on every rank (inside a graph, prefixed with the current name
        scope); by default one is generated from the order of the calls.
    """
    op = _resolve(op, average)
    mpi_ops.check_op(op, "grouped_allreduce")
    tensors = list(tensors)
    if not tensors:
        return []
    base = engine_name("grouped_allreduce", name, ignore_name_scope)
    results: list[Any] = [None] * len(tensors)
    dense, contexts = [], []
    for i, t in enumerate(tensors):
        if isinstance(t, tf.IndexedSlices):
            results[i] = sparse_allreduce(t, f"{base}.sparse.{i}", op, process_set)
        else:
            compressed, ctx = compression.compress(tf.convert_to_tensor(t))
            dense.append((i, compressed))
            contexts.append(ctx)
    if dense:
        reduced = mpi_ops.grouped_allreduce_tensors(
            [t for _, t in dense], base, op, prescale_factor, postscale_factor, process_set
        )
        for (i, _), r, ctx in zip(dense, reduced, contexts, strict=True):
            results[i] = compression.decompress(r, ctx)
    return results


@shared_parameters
def allgather(
    tensor: Any, name: str | None = None, ignore_name_scope: bool = False, process_set: ProcessSet = global_process_set
) -> tf.Tensor:
    """Concatenates every rank's tensor along the first dimension (which may differ per rank).

    :param tensor: the tensor to gather; its first dimension may differ between ranks, the others and the dtype must
        match.
    :param name: a name for the operation, the same on every rank (inside a graph, prefixed with the current name
        scope); by default one is generated from the order of the calls.
    :param ignore_name_scope: use ``name`` as it is, without the current name scope.
    :param process_set: |shared|
    """
    return mpi_ops.allgather_tensor(
        tf.convert_to_tensor(tensor), engine_name("allgather", name, ignore_name_scope), process_set
    )


@shared_parameters
def grouped_allgather(
    tensors: Sequence[Any],
    name: str | None = None,
    ignore_name_scope: bool = False,
    process_set: ProcessSet = global_process_set,
) -> list[tf.Tensor]:
    """Allgathers a list of tensors as one unit.

    :param tensors: the tensors gathered as one group (each as for :func:`allgather`).
    :param name: a name for the operation, the same on every rank (inside a graph, prefixed with the current name
        scope); by default one is generated from the order of the calls.
    :param ignore_name_scope: use ``name`` as it is, without the current name scope.
    :param process_set: |shared|
    """
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        return []
    base = engine_name("grouped_allgather", name, ignore_name_scope)
    return mpi_ops.grouped_allgather_tensors(tensors, base, process_set)


@shared_parameters
def broadcast(
    tensor: Any,
    root_rank: int,
    name: str | None = None,
    ignore_name_scope: bool = False,
    process_set: ProcessSet = global_process_set,
) -> tf.Tensor:
    """Returns ``root_rank``'s tensor on every rank (``root_rank``: the rank within the set).

    :param tensor: the root's tensor is sent; on the other ranks it gives the shape and dtype.
    :param root_rank: the rank whose tensor every rank gets (its rank within ``process_set``).
    :param name: a name for the operation, the same on every rank (inside a graph, prefixed with the current name
        scope); by default one is generated from the order of the calls.
    :param ignore_name_scope: use ``name`` as it is, without the current name scope.
    :param process_set: |shared|
    """
    return mpi_ops.broadcast_tensor(
        tf.convert_to_tensor(tensor), int(root_rank), engine_name("broadcast", name, ignore_name_scope), process_set
    )


@shared_parameters
def broadcast_(
    variables: Sequence[tf.Variable],
    root_rank: int,
    name: str | None = None,
    process_set: ProcessSet = global_process_set,
) -> list[tf.Tensor]:
    """Broadcasts ``variables`` from ``root_rank`` into themselves; returns their new values.

    :param variables: the ``tf.Variable`` objects to overwrite with the root's values (the same on every rank, in the
        same order).
    :param root_rank: the rank whose values every rank gets.
    :param name: a name for the operation, the same on every rank (inside a graph, prefixed with the current name
        scope); by default one is generated from the order of the calls.
    :param process_set: |shared|
    """
    variables = [tf_variable(v) for v in variables]
    if not variables:
        return []
    base = engine_name("broadcast_", name)
    names = [f"{base}.{i}" for i in range(len(variables))]
    values = mpi_ops.raw_broadcast([v.read_value() for v in variables], names, int(root_rank), process_set)
    assigns = [v.assign(value) for v, value in zip(variables, values, strict=True)]
    if tf.executing_eagerly():
        return [tf.convert_to_tensor(v) for v in variables]
    with tf.control_dependencies(assigns):
        return [tf.identity(v.read_value()) for v in variables]


@shared_parameters
def alltoall(
    tensor: Any,
    splits: Any = None,
    name: str | None = None,
    ignore_name_scope: bool = False,
    process_set: ProcessSet = global_process_set,
) -> Any:
    """Sends ``splits[i]`` rows (default: equal parts) to rank i of the set.

    Returns the received rows, and with ``splits`` given also the received splits (int32), as
    Horovod does.

    :param tensor: the tensor whose slices (along the first dimension) are sent to the ranks.
    :param splits: how many rows go to each rank of the set, in rank order (a list or an integer tensor, summing to the
        first dimension); by default equal parts.
    :param name: a name for the operation, the same on every rank (inside a graph, prefixed with the current name
        scope); by default one is generated from the order of the calls.
    :param ignore_name_scope: use ``name`` as it is, without the current name scope.
    :param process_set: |shared|
    """
    received, received_splits = mpi_ops.alltoall_tensor(
        tf.convert_to_tensor(tensor), splits, engine_name("alltoall", name, ignore_name_scope), process_set
    )
    return (received, received_splits) if splits is not None else received


@shared_parameters
def reducescatter(
    tensor: Any,
    device_dense: str = "",
    compression: Any = Compression.none,
    op: int = Average,
    name: str | None = None,
    process_set: ProcessSet = global_process_set,
    ignore_name_scope: bool = False,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
) -> tf.Tensor:
    """Reduces over ranks and returns this rank's part of the first dimension (the first ranks get
    one row more when it does not divide evenly).

    :param tensor: the tensor to reduce, the same shape and dtype on every rank; its first dimension is scattered.
    :param device_dense: accepted for Horovod's signature (the device dense tensors are reduced on); hvd reduces on the
        CPU, where its backends read tensors, and ignores it.
    :param compression: |shared|
    :param op: |shared:reducescatter_op|
    :param name: a name for the operation, the same on every rank (inside a graph, prefixed with the current name
        scope); by default one is generated from the order of the calls.
    :param process_set: |shared|
    :param ignore_name_scope: use ``name`` as it is, without the current name scope.
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    """
    compressed, ctx = compression.compress(tf.convert_to_tensor(tensor))
    reduced = mpi_ops.reducescatter_tensors(
        [compressed],
        engine_name("reducescatter", name, ignore_name_scope),
        op,
        prescale_factor,
        postscale_factor,
        process_set,
        group=False,
    )[0]
    return compression.decompress(reduced, ctx)


@shared_parameters
def grouped_reducescatter(
    tensors: Sequence[Any],
    device_dense: str = "",
    compression: Any = Compression.none,
    op: int = Average,
    process_set: ProcessSet = global_process_set,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    *,
    name: str | None = None,
    ignore_name_scope: bool = False,
) -> list[tf.Tensor]:
    """Reducescatters a list of tensors as one unit. The parameters are in Horovod's order; ``name`` and
    ``ignore_name_scope``, hvd's additions, are keyword-only.

    :param tensors: the tensors reduced and scattered as one group (each as for :func:`reducescatter`).
    :param device_dense: accepted for Horovod's signature (the device dense tensors are reduced on); hvd reduces on the
        CPU, where its backends read tensors, and ignores it.
    :param compression: |shared|
    :param op: |shared:reducescatter_op|
    :param name: a name for the operation, the same on every rank (inside a graph, prefixed with the current name
        scope); by default one is generated from the order of the calls.
    :param process_set: |shared|
    :param ignore_name_scope: use ``name`` as it is, without the current name scope.
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    """
    tensors = list(tensors)
    if not tensors:
        return []
    pairs = [compression.compress(tf.convert_to_tensor(t)) for t in tensors]
    reduced = mpi_ops.reducescatter_tensors(
        [p[0] for p in pairs],
        engine_name("grouped_reducescatter", name, ignore_name_scope),
        op,
        prescale_factor,
        postscale_factor,
        process_set,
        group=True,
    )
    return [compression.decompress(r, p[1]) for r, p in zip(reduced, pairs, strict=True)]
