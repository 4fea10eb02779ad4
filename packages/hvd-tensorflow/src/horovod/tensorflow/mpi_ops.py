"""Horovod's TensorFlow collectives, with the gradients Horovod defines.

Every collective runs through :mod:`horovod.tensorflow.bridge`: eagerly on hvd-core's numpy
collectives, inside graphs as one of hvd's asynchronous kernels (:mod:`horovod.tensorflow.native`).
The differentiable forms use ``tf.custom_gradient``, so ``tf.GradientTape`` and ``tf.gradients``
see Horovod's gradients: allreduce -> the same allreduce of the gradient; allgather -> Average
allreduce of the gradient, then this rank's rows; broadcast -> Average allreduce of the gradient
on the root, zeros elsewhere; alltoall -> alltoall back with the received splits; reducescatter ->
allgather of the gradient (times the set's size for Sum, times the scale factors).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from horovod.common import framework_api as api
from horovod.common.framework_api import (
    Adasum,
    Average,
    Collectives,
    Max,
    Min,
    ProcessSet,
    Product,
    Sum,
    add_process_set,
    ccl_built,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    global_process_set,
    gloo_built,
    gloo_enabled,
    group_names,
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
    process_set_id,
    rank,
    remove_process_set,
    rocm_built,
    shared_parameters,
    shutdown,
    size,
    start_timeline,
    stop_timeline,
    synchronize,
)
from horovod.tensorflow import bridge, native

#: hvd-core's collectives on numpy arrays: what TensorFlow tensors cross as.
numpy_collectives = Collectives(bridge.AlignedArrays())


def _normalize_name(name: str) -> str:
    """A name as TensorFlow allows it in op names (Horovod's rule)."""
    return re.sub("[^a-zA-Z0-9_]", "_", name)


def engine_name(kind: str, name: str | None, ignore_name_scope: bool = False) -> str:
    """The engine's name for a collective: ``name`` inside the current name scope (unless
    ``ignore_name_scope``), or an automatic one. Inside graphs it is chosen while the graph is
    built, so every run of a tf.function reuses it (and the engine's response cache hits)."""
    if name is None:
        return api.auto_name(kind)
    scope = tf.get_current_name_scope() if bridge.in_graph() and not ignore_name_scope else ""
    return f"{scope}/{name}" if scope else name


def step_name(prefix: str) -> str:
    """A name for a collective that runs every training step from the same place (gradients,
    batch statistics). Eagerly it completes before the step goes on, so each step reuses the
    last step's name and the engine's response cache hits; in a graph it is fixed when the graph
    is built, numbered so that two such places in one graph never share it."""
    return api.auto_name(prefix) if bridge.in_graph() else prefix


def check_op(op: int, what: str, supported: Sequence[int] = api.ALLREDUCE_OPS) -> None:
    """Refuses, before anything is submitted, a reduction hvd does not run (Adasum, Min, Max or
    Product for a reducescatter) with hvd-core's UnsupportedOperationError: a ValueError and a
    RuntimeError, as scripts written for either catch it."""
    api.check_reduce_op(op, what, supported)


def _leading_unknown(shape: tf.TensorShape) -> tf.TensorShape | None:
    """The static shape of a result whose first dimension depends on the other ranks."""
    if shape.rank is None:
        return None
    return tf.TensorShape([None]).concatenate(shape[1:]) if shape.rank else shape


def _set_size(process_set: ProcessSet) -> int:
    return api.set_size(process_set)


# --- the raw collectives (no gradients): lists in, lists out ----------------------------------------


def raw_allreduce(
    tensors: Sequence[tf.Tensor],
    names: Sequence[str],
    op: int,
    prescale_factor: float,
    postscale_factor: float,
    process_set: ProcessSet,
    group: bool = False,
    groups: Sequence[Sequence[int]] = (),
) -> list[tf.Tensor]:
    """Allreduces ``tensors`` in one call (in a graph: one op per group, one for the rest), each
    under its name.

    ``group``: all of them as one engine group (negotiated and run together); ``groups``: lists of
    indices each submitted as one group (the rest individually). Individual allreduces are fused
    by the engine as usual.
    """
    check_op(op, "allreduce")
    tensors = [bridge.as_tensor(t) for t in tensors]
    if not tensors:
        return []
    grouped = [list(range(len(tensors)))] if group else [list(g) for g in groups]
    in_group = {i for g in grouped for i in g}
    single = [i for i in range(len(tensors)) if i not in in_group]
    pre, post = float(prescale_factor), float(postscale_factor)

    def submit(arrays: list[np.ndarray]) -> list[int]:
        handles: list[int] = [0] * len(arrays)
        for indices in grouped:
            parts = numpy_collectives.grouped_allreduce_async(
                [arrays[i] for i in indices],
                name=names[indices[0]],
                op=op,
                prescale_factor=pre,
                postscale_factor=post,
                process_set=process_set,
            )
            for i, h in zip(indices, parts, strict=True):
                handles[i] = h
        for i in single:
            handles[i] = numpy_collectives.submit_allreduce(arrays[i], names[i], op, pre, post, process_set)
        return handles

    def graph_op(xs: list[tf.Tensor]) -> list[tf.Tensor]:
        outputs: list[tf.Tensor] = [xs[0]] * len(xs)
        calls = [(indices, *group_names(names[indices[0]], len(indices))) for indices in grouped]
        if single:
            calls.append((single, [names[i] for i in single], -1))
        for indices, op_names, group_id in calls:
            reduced = native.ops().hvd_allreduce(
                [xs[i] for i in indices],
                names=op_names,
                reduce_op=op,
                prescale=pre,
                postscale=post,
                process_set=process_set_id(process_set),
                group_id=group_id,
            )
            for i, out in zip(indices, reduced, strict=True):
                outputs[i] = out
        return outputs

    return bridge.run(tensors, submit, list, graph_op, [t.shape for t in tensors])


def raw_allgather(tensors: Sequence[tf.Tensor], names: Sequence[str], process_set: ProcessSet) -> list[tf.Tensor]:
    tensors = [bridge.as_tensor(t) for t in tensors]

    def submit(arrays: list[np.ndarray]) -> list[int]:
        return [
            numpy_collectives.allgather_async(a, name=n, process_set=process_set)
            for a, n in zip(arrays, names, strict=True)
        ]

    def graph_op(xs: list[tf.Tensor]) -> list[tf.Tensor]:
        return list(native.ops().hvd_allgather(xs, names=list(names), process_set=process_set_id(process_set)))

    return bridge.run(tensors, submit, list, graph_op, [_leading_unknown(t.shape) for t in tensors])


def raw_broadcast(
    tensors: Sequence[tf.Tensor], names: Sequence[str], root_rank: int, process_set: ProcessSet
) -> list[tf.Tensor]:
    tensors = [bridge.as_tensor(t) for t in tensors]

    def submit(arrays: list[np.ndarray]) -> list[int]:
        return [
            numpy_collectives.broadcast_async(a, root_rank, name=n, process_set=process_set)
            for a, n in zip(arrays, names, strict=True)
        ]

    def graph_op(xs: list[tf.Tensor]) -> list[tf.Tensor]:
        return list(
            native.ops().hvd_broadcast(
                xs, names=list(names), root_rank=int(root_rank), process_set=process_set_id(process_set)
            )
        )

    return bridge.run(tensors, submit, list, graph_op, [t.shape for t in tensors])


def raw_reducescatter(
    tensors: Sequence[tf.Tensor],
    names: Sequence[str],
    op: int,
    prescale_factor: float,
    postscale_factor: float,
    process_set: ProcessSet,
    group: bool,
) -> list[tf.Tensor]:
    if op not in (Average, Sum):
        raise ValueError(f"reducescatter supports op=hvd.Average and op=hvd.Sum, got op={op}")
    tensors = [bridge.as_tensor(t) for t in tensors]
    pre, post = float(prescale_factor), float(postscale_factor)

    def submit(arrays: list[np.ndarray]) -> list[int]:
        if group:
            return numpy_collectives.grouped_reducescatter_async(arrays, names[0], op, process_set, pre, post)
        return [
            numpy_collectives.reducescatter_async(a, n, op, process_set, pre, post)
            for a, n in zip(arrays, names, strict=True)
        ]

    def graph_op(xs: list[tf.Tensor]) -> list[tf.Tensor]:
        op_names, group_id = group_names(names[0], len(xs)) if group else (list(names), -1)
        return list(
            native.ops().hvd_reducescatter(
                xs,
                names=op_names,
                reduce_op=op,
                prescale=pre,
                postscale=post,
                process_set=process_set_id(process_set),
                group_id=group_id,
            )
        )

    return bridge.run(tensors, submit, list, graph_op, [_leading_unknown(t.shape) for t in tensors])


def _integer_splits(splits: Any, name: str) -> tf.Tensor:
    """``splits`` as the kernels take them (int32), refusing any other than integers, in every
    mode (a dtype is known when a graph is built)."""
    given = tf.convert_to_tensor(splits)
    if not given.dtype.is_integer:
        raise api.non_integer_splits_error(f"alltoall of tensor '{name}'", f"a tensor of {given.dtype.name}")
    return tf.cast(given, tf.int32)


def raw_alltoall(
    tensor: tf.Tensor, splits: tf.Tensor | None, name: str, process_set: ProcessSet
) -> tuple[tf.Tensor, tf.Tensor]:
    tensor = bridge.as_tensor(tensor)
    # An empty splits tensor asks for an even split (the kernels' convention).
    split_tensor = tf.zeros([0], tf.int32) if splits is None else _integer_splits(splits, name)

    def submit(arrays: list[np.ndarray]) -> list[int]:
        split_list = [int(s) for s in arrays[1].reshape(-1)] or None
        return [numpy_collectives.alltoall_async(arrays[0], split_list, name=name, process_set=process_set)]

    def finish(results: list[Any]) -> list[np.ndarray]:
        received, received_splits = results[0]
        return [received, np.asarray(received_splits, dtype=np.int32)]

    def graph_op(xs: list[tf.Tensor]) -> list[tf.Tensor]:
        return list(native.ops().hvd_alltoall(xs[0], xs[1], names=[name], process_set=process_set_id(process_set)))

    size = process_set.size() if process_set.process_set_id else None
    out = bridge.run(
        [tensor, split_tensor],
        submit,
        finish,
        graph_op,
        [_leading_unknown(tensor.shape), tf.TensorShape([size])],
    )
    return out[0], out[1]


# --- the differentiable collectives --------------------------------------------------------------


def _tape_check() -> Callable[[], bool] | None:
    """TensorFlow's own "is any gradient tape active?" (internal: its public API has no such
    question); None where a release lacks it, and then every eager collective may be recorded."""
    try:
        from tensorflow.python.eager import record
    except ImportError:
        return None
    check = getattr(record, "could_possibly_record", None)
    return check if callable(check) else None


_could_record = _tape_check()


def _may_record() -> bool:
    """False only when running eagerly with no gradient tape active: then a collective needs no
    gradient, and building tf.custom_gradient's wrapper (about 160 us a call, measured) is skipped.
    Graphs always get the gradient (tf.gradients needs no tape)."""
    return bridge.in_graph() or _could_record is None or bool(_could_record())


def _differentiable(forward: Callable[[tf.Tensor], tf.Tensor], backward: Callable[[tf.Tensor], tf.Tensor]) -> Any:
    if not _may_record():
        return forward

    @tf.custom_gradient  # type: ignore[untyped-decorator]  # (TensorFlow ships no type information)
    def fn(x: tf.Tensor) -> Any:
        return forward(x), backward

    return fn


def allreduce_tensor(
    tensor: tf.Tensor,
    name: str,
    op: int,
    prescale_factor: float,
    postscale_factor: float,
    process_set: ProcessSet,
) -> tf.Tensor:
    """One differentiable allreduce (the gradient: the same allreduce of the incoming gradient)."""

    def forward(x: tf.Tensor) -> tf.Tensor:
        return raw_allreduce([x], [name], op, prescale_factor, postscale_factor, process_set)[0]

    def backward(dy: tf.Tensor) -> tf.Tensor:
        grad_name = engine_name("allreduce.grad", None)
        return raw_allreduce([dy], [grad_name], op, prescale_factor, postscale_factor, process_set)[0]

    return _differentiable(forward, backward)(tensor)


def _grouped_differentiable(forward: Callable[[list[tf.Tensor]], list[tf.Tensor]], backward: Any) -> Any:
    if not _may_record():
        return lambda *xs: forward(list(xs))

    @tf.custom_gradient  # type: ignore[untyped-decorator]  # (TensorFlow ships no type information)
    def fn(*xs: tf.Tensor) -> Any:
        def grad(*dys: tf.Tensor) -> list[tf.Tensor]:
            return list(backward(list(dys), list(xs)))

        return forward(list(xs)), grad

    return fn


def grouped_allreduce_tensors(
    tensors: Sequence[tf.Tensor],
    name: str,
    op: int,
    prescale_factor: float,
    postscale_factor: float,
    process_set: ProcessSet,
) -> list[tf.Tensor]:
    """Differentiable allreduce of a list as one engine group."""
    names = [f"{name}.{i}" for i in range(len(tensors))]

    def forward(xs: list[tf.Tensor]) -> list[tf.Tensor]:
        return raw_allreduce(xs, names, op, prescale_factor, postscale_factor, process_set, group=True)

    def backward(dys: list[tf.Tensor], xs: list[tf.Tensor]) -> list[tf.Tensor]:
        base = engine_name("grouped_allreduce.grad", None)
        dys = [tf.zeros_like(x) if d is None else tf.cast(d, x.dtype) for d, x in zip(dys, xs, strict=True)]
        grad_names = [f"{base}.{i}" for i in range(len(dys))]
        return raw_allreduce(dys, grad_names, op, prescale_factor, postscale_factor, process_set, group=True)

    return list(_grouped_differentiable(forward, backward)(*tensors))


def _my_rows(gathered: tf.Tensor, x: tf.Tensor, name: str, process_set: ProcessSet) -> tf.Tensor:
    """This rank's rows of an allgather's result: every rank's first dimension is allgathered."""
    first = tf.reshape(tf.shape(x, out_type=tf.int64)[0], [1])
    counts = raw_allgather([first], [f"{name}.rows"], process_set)[0]
    position = api.set_rank(process_set)
    start = tf.reduce_sum(counts[:position])
    return gathered[start : start + counts[position]]


def allgather_tensor(tensor: tf.Tensor, name: str, process_set: ProcessSet) -> tf.Tensor:
    def forward(x: tf.Tensor) -> tf.Tensor:
        return raw_allgather([x], [name], process_set)[0]

    def backward(dy: tf.Tensor) -> tf.Tensor:
        grad_name = engine_name("allgather.grad", None)
        reduced = raw_allreduce([dy], [grad_name], Average, 1.0, 1.0, process_set)[0]
        return _my_rows(reduced, tensor, grad_name, process_set)

    return _differentiable(forward, backward)(tensor)


def grouped_allgather_tensors(tensors: Sequence[tf.Tensor], name: str, process_set: ProcessSet) -> list[tf.Tensor]:
    names = [f"{name}.{i}" for i in range(len(tensors))]

    def forward(xs: list[tf.Tensor]) -> list[tf.Tensor]:
        return raw_allgather(xs, names, process_set)

    def backward(dys: list[tf.Tensor], xs: list[tf.Tensor]) -> list[tf.Tensor]:
        base = engine_name("grouped_allgather.grad", None)
        grads = []
        for i, (dy, x) in enumerate(zip(dys, xs, strict=True)):
            reduced = raw_allreduce([dy], [f"{base}.{i}"], Average, 1.0, 1.0, process_set)[0]
            grads.append(_my_rows(reduced, x, f"{base}.{i}", process_set))
        return grads

    return list(_grouped_differentiable(forward, backward)(*tensors))


def broadcast_tensor(tensor: tf.Tensor, root_rank: int, name: str, process_set: ProcessSet) -> tf.Tensor:
    def forward(x: tf.Tensor) -> tf.Tensor:
        return raw_broadcast([x], [name], root_rank, process_set)[0]

    def backward(dy: tf.Tensor) -> tf.Tensor:
        reduced = raw_allreduce([dy], [engine_name("broadcast.grad", None)], Average, 1.0, 1.0, process_set)[0]
        return reduced if api.rank() == root_rank else reduced * 0  # root_rank: a global rank

    return _differentiable(forward, backward)(tensor)


def alltoall_tensor(tensor: tf.Tensor, splits: Any, name: str, process_set: ProcessSet) -> tuple[tf.Tensor, tf.Tensor]:
    received_splits: list[tf.Tensor] = []

    def forward(x: tf.Tensor) -> tf.Tensor:
        received, rsplits = raw_alltoall(x, splits, name, process_set)
        received_splits.append(rsplits)
        return received

    def backward(dy: tf.Tensor) -> tf.Tensor:
        return raw_alltoall(dy, received_splits[0], engine_name("alltoall.grad", None), process_set)[0]

    received = _differentiable(forward, backward)(tensor)
    return received, received_splits[0]


def reducescatter_tensors(
    tensors: Sequence[tf.Tensor],
    name: str,
    op: int,
    prescale_factor: float,
    postscale_factor: float,
    process_set: ProcessSet,
    group: bool,
) -> list[tf.Tensor]:
    check_op(op, "grouped_reducescatter" if group else "reducescatter", api.REDUCESCATTER_OPS)
    # A group is named once (hvd-core names its members); single tensors each by their own name.
    names = [name] if group or len(tensors) == 1 else [f"{name}.{i}" for i in range(len(tensors))]

    def forward(xs: list[tf.Tensor]) -> list[tf.Tensor]:
        return raw_reducescatter(xs, names, op, prescale_factor, postscale_factor, process_set, group)

    def backward(dys: list[tf.Tensor], xs: list[tf.Tensor]) -> list[tf.Tensor]:
        base = engine_name("reducescatter.grad", None)
        scale = prescale_factor * postscale_factor * (_set_size(process_set) if op == Sum else 1)
        grads = [raw_allgather([dy], [f"{base}.{i}"], process_set)[0] for i, dy in enumerate(dys)]
        return [g * tf.cast(scale, g.dtype) if scale != 1 else g for g in grads]

    return list(_grouped_differentiable(forward, backward)(*tensors))


# --- graph-time queries ----------------------------------------------------------------------------


def _process_set_by_id(process_set_id: int) -> ProcessSet:
    if process_set_id == 0:
        return global_process_set
    process_set = ProcessSet([])
    process_set.process_set_id = process_set_id
    return process_set


def _query_op(value: Callable[[], int], name: str | None) -> tf.Tensor:
    """A scalar int32 evaluated when the graph runs (eagerly: now)."""
    if not bridge.in_graph():
        return tf.constant(value(), dtype=tf.int32)
    result = tf.numpy_function(lambda: np.int32(value()), [], tf.int32, stateful=True, name=name or "HorovodQuery")
    result.set_shape([])
    return result


def size_op(process_set_id: int = 0, name: str | None = None) -> tf.Tensor:
    """The number of ranks (of the process set), as a tensor computed when the graph runs.

    :param process_set_id: the id of a registered process set (``ProcessSet.process_set_id``; default 0, all ranks).
    :param name: a name for the TensorFlow op (optional).
    """
    return _query_op(lambda: api.set_size(_process_set_by_id(process_set_id)), name)


def rank_op(name: str | None = None, process_set_id: int = 0) -> tf.Tensor:
    """This process's rank (in the process set), as a tensor computed when the graph runs.

    :param name: a name for the TensorFlow op (optional; first, as in Horovod's ``rank_op(name)``).
    :param process_set_id: the id of a registered process set (``ProcessSet.process_set_id``; default 0, all ranks).
    """
    return _query_op(lambda: api.set_rank(_process_set_by_id(process_set_id)), name)


def local_size_op(name: str | None = None) -> tf.Tensor:
    """The number of ranks on this host, as a tensor computed when the graph runs.

    :param name: a name for the TensorFlow op (optional).
    """
    return _query_op(api.local_size, name)


def local_rank_op(name: str | None = None) -> tf.Tensor:
    """This process's rank on its host, as a tensor computed when the graph runs.

    :param name: a name for the TensorFlow op (optional).
    """
    return _query_op(api.local_rank, name)


def process_set_included_op(process_set_id: int = 0, name: str | None = None) -> tf.Tensor:
    """1 when this process belongs to the process set, 0 when not.

    :param process_set_id: the id of a registered process set (``ProcessSet.process_set_id``; default 0, all ranks).
    :param name: a name for the TensorFlow op (optional).
    """

    def included() -> int:
        process_set = _process_set_by_id(process_set_id)
        if process_set_id == 0:
            api.require_initialized()
            return 1
        if process_set.size() is None:
            raise ValueError(f"process set {process_set_id} is not known to the running instance")
        return 1 if process_set.included() else 0

    return _query_op(included, name)


# --- tensor-free operations ---------------------------------------------------------------------------


def join() -> tf.Tensor:
    """Declares this rank done until every rank has joined; returns the rank that joined last."""
    if not bridge.in_graph():
        return tf.constant(api.join(), dtype=tf.int32)
    return _scalar(native.ops().hvd_join())


@shared_parameters
def barrier(process_set: ProcessSet = global_process_set) -> tf.Tensor:
    """Blocks until every rank of the process set has reached it (in a graph: when it runs).

    :param process_set: |shared|
    """
    if not bridge.in_graph():
        api.barrier(process_set)
        return tf.constant(0, dtype=tf.int32)
    return _scalar(native.ops().hvd_barrier(process_set=process_set_id(process_set)))


def _scalar(tensor: tf.Tensor) -> tf.Tensor:
    tensor.set_shape([])
    return tensor


# --- Horovod's mpi_ops module -------------------------------------------------------------------
# Scripts, and Keras layers written for Horovod, import from horovod.tensorflow.mpi_ops the job's
# questions, the ops, the process sets and its raw collectives (allreduce and reducescatter with
# Sum as the default op, no compression). The collectives whose signatures horovod.tensorflow
# shares come from there (__getattr__: that module imports this one).


def _allreduce(
    tensor: Any,
    name: str | None = None,
    op: int = Sum,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    ignore_name_scope: bool = False,
    process_set: ProcessSet = global_process_set,
) -> tf.Tensor:
    """Horovod's raw allreduce: ``op`` Sum by default; no compression, no IndexedSlices."""
    check_op(op, "allreduce")
    name = engine_name("allreduce", name, ignore_name_scope)
    return allreduce_tensor(bridge.as_tensor(tensor), name, op, prescale_factor, postscale_factor, process_set)


def _grouped_allreduce(
    tensors: Sequence[Any],
    name: str | None = None,
    op: int = Sum,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    ignore_name_scope: bool = False,
    process_set: ProcessSet = global_process_set,
) -> list[tf.Tensor]:
    """Horovod's raw grouped allreduce: the tensors as one group, ``op`` Sum by default."""
    check_op(op, "grouped_allreduce")
    tensors = [bridge.as_tensor(t) for t in tensors]
    if not tensors:
        return []
    name = engine_name("grouped_allreduce", name, ignore_name_scope)
    return grouped_allreduce_tensors(tensors, name, op, prescale_factor, postscale_factor, process_set)


def reducescatter(
    tensor: Any,
    name: str | None = None,
    op: int = Sum,
    ignore_name_scope: bool = False,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    process_set: ProcessSet = global_process_set,
) -> tf.Tensor:
    """Horovod's raw reducescatter (its mpi_ops order of parameters; ``op`` Sum by default): this
    rank's part of the first dimension of the reduction.

    :param tensor: the tensor to reduce, the same shape and dtype on every rank.
    :param name: a name for the operation, the same on every rank; by default one is generated.
    :param op: ``Sum`` (the default) or ``Average``.
    :param ignore_name_scope: use ``name`` as it is, without the current name scope.
    :param prescale_factor: multiplies the tensor before the reduction.
    :param postscale_factor: multiplies the result.
    :param process_set: the ranks taking part (all of them by default).
    """
    name = engine_name("reducescatter", name, ignore_name_scope)
    tensors = [tf.convert_to_tensor(tensor)]
    return reducescatter_tensors(tensors, name, op, prescale_factor, postscale_factor, process_set, group=False)[0]


def grouped_reducescatter(
    tensors: Sequence[Any],
    name: str | None = None,
    op: int = Sum,
    ignore_name_scope: bool = False,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    process_set: ProcessSet = global_process_set,
) -> list[tf.Tensor]:
    """Horovod's raw grouped reducescatter (its mpi_ops order of parameters; ``op`` Sum by
    default): the tensors as one group, each as :func:`reducescatter` does.

    :param tensors: the tensors to reduce, each the same shape and dtype on every rank.
    :param name: a name for the group, the same on every rank; by default one is generated.
    :param op: ``Sum`` (the default) or ``Average``.
    :param ignore_name_scope: use ``name`` as it is, without the current name scope.
    :param prescale_factor: multiplies the tensors before the reduction.
    :param postscale_factor: multiplies the results.
    :param process_set: the ranks taking part (all of them by default).
    """
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        return []
    name = engine_name("grouped_reducescatter", name, ignore_name_scope)
    return reducescatter_tensors(tensors, name, op, prescale_factor, postscale_factor, process_set, group=True)


# Not in __all__, which tools read as a literal list of this module's own names.
_FROM_COLLECTIVES = ("allgather", "grouped_allgather", "broadcast", "alltoall")


def __getattr__(name: str) -> Any:
    if name in _FROM_COLLECTIVES:
        from horovod.tensorflow import collectives

        return getattr(collectives, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Adasum",
    "Average",
    "Max",
    "Min",
    "ProcessSet",
    "Product",
    "Sum",
    "add_process_set",
    "allgather_tensor",
    "allreduce_tensor",
    "alltoall_tensor",
    "barrier",
    "broadcast_tensor",
    "ccl_built",
    "check_op",
    "cross_rank",
    "cross_size",
    "cuda_built",
    "ddl_built",
    "engine_name",
    "global_process_set",
    "gloo_built",
    "gloo_enabled",
    "grouped_allgather_tensors",
    "grouped_allreduce_tensors",
    "grouped_reducescatter",
    "handle_average_backwards_compatibility",
    "init",
    "is_homogeneous",
    "is_initialized",
    "join",
    "local_rank",
    "local_rank_op",
    "local_size",
    "local_size_op",
    "mpi_built",
    "mpi_enabled",
    "mpi_threads_supported",
    "nccl_built",
    "numpy_collectives",
    "process_set_included_op",
    "rank",
    "rank_op",
    "raw_allgather",
    "raw_allreduce",
    "raw_broadcast",
    "reducescatter",
    "reducescatter_tensors",
    "remove_process_set",
    "rocm_built",
    "shutdown",
    "size",
    "size_op",
    "start_timeline",
    "step_name",
    "stop_timeline",
    "synchronize",
]
