"""Collectives written once, for any tensor type, through a small adapter.

Framework packages (hvd-torch, hvd-tensorflow, ...) do not re-implement allreduce & co.: they
give a :class:`TensorAdapter` that says how their tensors reach the engine (zero-copy where the
layout allows) and how engine-allocated results come back, and call these methods. The numpy
API of ``horovod.common`` is the same class with the numpy adapter.
"""

from __future__ import annotations

import contextlib
import hashlib
import numbers
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from horovod.common import _core, state
from horovod.common.api_text import shared_parameters
from horovod.common.process_sets import ProcessSet, global_process_set, process_set_id

# Reduction ops, with Horovod's numbering.
Average, Sum, Adasum, Min, Max, Product = 0, 1, 2, 3, 4, 5

_NO_GROUP = (-1, 0)  # (group id, group size) of an operation that is not part of a group
_HOST = (0, 0)  # (device ordinal, stream) of a CPU tensor: neither is used


class TensorAdapter(Protocol):
    """How one framework's tensors meet the engine.

    An adapter of device tensors also has ``placement(tensor) -> (device ordinal, stream)`` for a
    prepared tensor not on the CPU: the stream is the runtime's handle as an integer (0: the
    default stream) on which the tensor's producers run. The engine reads the tensor after the work
    queued there so far, and synchronizing the operation makes that stream wait for its result.
    Without it, device 0 and its default stream.
    """

    def prepare(self, tensor: Any) -> Any:
        """The tensor as a contiguous, host-addressable tensor of the same type (no copy if already so).

        :param tensor: a tensor the user passed to a collective.
        """

    def describe(self, tensor: Any) -> tuple[int, Sequence[int], int]:
        """(engine dtype code, shape, device kind) of a prepared tensor; ValueError if unsupported.

        :param tensor: a tensor ``prepare`` returned.
        """

    def buffer(self, tensor: Any) -> Any:
        """What the engine reads and writes the prepared tensor through, without a copy: an object
        sharing its memory (DLPack-capable), or, for host memory, ``(address, byte count)``: much
        cheaper to pass than a DLPack capsule (the caller's reference keeps the memory alive).

        :param tensor: a tensor ``prepare`` or ``empty_like`` returned.
        """

    def empty_like(self, tensor: Any) -> Any:
        """A new uninitialised tensor of the same shape, dtype and device.

        :param tensor: the prepared input the result is shaped after.
        """

    def from_engine(self, core_handle: Any, like: Any) -> Any:
        """The engine-allocated result of a completed handle, as a tensor of `like`'s type and dtype.

        :param core_handle: the engine's handle of the completed operation (its ``output()`` and ``output_shape``).
        :param like: the prepared input, whose type, dtype and device the result takes.
        """

    def copy_into(self, target: Any, source: Any) -> Any:
        """Copies `source` into `target` (same shape and dtype) and returns `target`.

        :param target: the tensor written to (the user's input of an in-place operation).
        :param source: the tensor holding the result.
        """


def _placement(adapter: Any, tensor: Any) -> tuple[int, int]:
    placement = getattr(adapter, "placement", None)  # optional in the protocol: adapters older than it
    return (0, 0) if placement is None else placement(tensor)


def handle_average_backwards_compatibility(op: int | None, average: bool | None, stacklevel: int = 4) -> int:
    """Maps the deprecated ``average=`` argument onto ``op`` (default: Average).

    ``stacklevel`` locates the user's call for the warning (frames above this function).

    :param op: the ``op`` argument the user gave (``None`` when not given).
    :param average: the deprecated ``average`` argument (``None`` when not given); giving it warns with a
        DeprecationWarning.
    :param stacklevel: how many frames above this function the user's call is, for the warning's location.
    :raises ValueError: when both ``op`` and ``average`` are given.
    """
    if average is not None:
        if op is not None:
            raise ValueError("op and average cannot both be given; use op only (average is deprecated)")
        warnings.warn(
            "the 'average' argument is deprecated; use op=hvd.Average or op=hvd.Sum",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
        return Average if average else Sum
    return Average if op is None else op


def group_key(base_name: str) -> int:
    """A group's id, derived from its name (which every rank gives alike), not from the order in
    which ranks happen to submit their groups."""
    return int.from_bytes(hashlib.blake2b(base_name.encode(), digest_size=8).digest(), "little") >> 1


def group_names(base_name: str, count: int) -> tuple[list[str], int]:
    """The engine's names of a group's ``count`` members (``<base_name>.<i>``) and the group's id.

    :param base_name: the group's name, the same on every rank.
    :param count: the number of tensors in the group.
    """
    return [f"{base_name}.{i}" for i in range(count)], group_key(base_name)


class Collectives:
    """Every collective, asynchronous with integer handles, for one tensor type.

    :param adapter: the framework's :class:`TensorAdapter`, through which its tensors reach the engine.
    """

    def __init__(self, adapter: TensorAdapter) -> None:
        self.adapter = adapter

    # --- submission -------------------------------------------------------------------------

    @staticmethod
    def _grouped(
        kind: str,
        op_type: int,
        tensors: Sequence[Any],
        name: str | None,
        process_set: ProcessSet,
        submit: Callable[[Any, str, tuple[int, int]], int],
    ) -> list[int]:
        """Submits each tensor as ``<name>.<i>`` of one group, so they are negotiated and run together.

        A member refused at submission is still negotiated, as a refusal (``Engine.refuse``; the
        engine does so itself for what it refuses), and the rest are submitted all the same: the group
        then completes on every rank instead of waiting for it forever. The first refusal is raised
        once the rest of the group has run."""
        names, group_id = group_names(name or state.context().auto_name(kind), len(tensors))
        group = (group_id, len(tensors))
        handles, refusal = [], None
        for t, n in zip(tensors, names, strict=True):
            try:
                handles.append(submit(t, n, group))
            except Exception as error:
                refusal = refusal or error
                if not getattr(error, "refusal_queued", False):  # the engine's own refusals are queued already
                    set_id = process_set_id(process_set)
                    state.context().engine.refuse(op_type, n, set_id, group_id, len(tensors), str(error))
        if refusal is not None:
            for handle in handles:  # the rest of the group runs: its names are free once it has
                with contextlib.suppress(Exception):  # the refusal is the error to raise
                    state.context().synchronize(handle)
            raise refusal
        return handles

    # This is the per-tensor cost of every collective (a training step submits hundreds of small
    # tensors), so it is written flat: explicit arguments passed to the engine positionally, no
    # per-call closures; results are made by `finish(core, kept, out)` (default: `out`), see Context.
    def _submit(
        self,
        op_type: int,
        tensor: Any,
        name: str,
        process_set: ProcessSet,
        output_like_input: bool,
        inplace: bool = False,
        finish: Callable[[Any, Any, Any], Any] | None = None,
        op: int = Sum,
        root: int = -1,
        prescale: float = 1.0,
        postscale: float = 1.0,
        splits: list[int] | None = None,
        group: tuple[int, int] = _NO_GROUP,
    ) -> int:
        ctx = state.context()
        a = self.adapter
        prepared = a.prepare(tensor)
        dtype, shape, device = a.describe(prepared)
        device_id, stream = _HOST if device == _core.DEVICE_CPU else _placement(a, prepared)
        # Ops whose result has the input's shape write into a tensor allocated here (or, in place,
        # into the input itself); the others get an engine-allocated result (its size is known only
        # after negotiation).
        kept, out_buffer = prepared, None
        if inplace:
            out = prepared
            if prepared is not tensor:  # the input had to be made contiguous: copy the result back
                finish, kept = self._copy_back, tensor
        elif output_like_input:
            out = a.empty_like(prepared)
            out_buffer = a.buffer(out)
        else:
            out = None
            if finish is None:
                finish = self._from_engine
        core = ctx.engine.enqueue(
            op_type,
            name,
            a.buffer(prepared),
            dtype,
            shape,
            out_buffer,
            op,
            root,
            prescale,
            postscale,
            process_set_id(process_set),
            splits,
            group[0],
            group[1],
            device,
            inplace,
            device_id,
            stream,
        )
        return ctx.submit(core, finish, kept, out)

    def _copy_back(self, core: Any, target: Any, out: Any) -> Any:
        return self.adapter.copy_into(target, out)

    def _from_engine(self, core: Any, prepared: Any, out: Any) -> Any:
        return self.adapter.from_engine(core, prepared)

    @shared_parameters
    def allreduce_async(
        self,
        tensor: Any,
        average: bool | None = None,
        name: str | None = None,
        op: int | None = None,
        prescale_factor: float = 1.0,
        postscale_factor: float = 1.0,
        process_set: ProcessSet = global_process_set,
        group: tuple[int, int] = _NO_GROUP,
        inplace: bool = False,
    ) -> int:
        """Starts an allreduce of ``tensor`` over the ranks of ``process_set``; returns a handle for
        :func:`poll` and :func:`synchronize`, whose result is the reduced tensor.

        :param tensor: the tensor, of the adapter's type. Not modified unless ``inplace``.
        :param average: |shared|
        :param name: |shared|
        :param op: the reduction (``Average``, ``Sum``, ``Min``, ``Max``, ``Product``); the engine refuses those it does
            not run (``ValueError``): framework adapters check first, with ``check_reduce_op``.
        :param prescale_factor: |shared|
        :param postscale_factor: |shared|
        :param process_set: |shared|
        :param group: for framework code: ``(group id, group size)`` of a group the operation belongs to, as
            ``group_names`` gives; by default it belongs to none.
        :param inplace: write the result into the input tensor itself instead of a new one.
        """
        op = handle_average_backwards_compatibility(op, average)
        return self.submit_allreduce(tensor, name, op, prescale_factor, postscale_factor, process_set, inplace, group)

    @shared_parameters
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
        """:meth:`allreduce_async` for callers that have resolved ``op`` already (from ``average=``).

        :param tensor: the tensor, of the adapter's type. Not modified unless ``inplace``.
        :param average: |shared|
        :param name: |shared|
        :param op: the reduction, already resolved from ``average`` (see
            :func:`handle_average_backwards_compatibility`).
        :param prescale_factor: |shared|
        :param postscale_factor: |shared|
        :param process_set: |shared|
        :param group: for framework code: ``(group id, group size)`` of a group the operation belongs to, as
            ``group_names`` gives; by default it belongs to none.
        :param inplace: write the result into the input tensor itself instead of a new one.
        """
        name = name or state.context().auto_name("allreduce")
        # Positional: the hottest call of all (see _submit's parameters for the meaning).
        return self._submit(
            _core.OP_ALLREDUCE,
            tensor,
            name,
            process_set,
            True,
            inplace,
            None,
            op,
            -1,
            float(prescale_factor),
            float(postscale_factor),
            None,
            group,
        )

    @shared_parameters
    def grouped_allreduce_async(
        self,
        tensors: Sequence[Any],
        average: bool | None = None,
        name: str | None = None,
        op: int | None = None,
        prescale_factor: float = 1.0,
        postscale_factor: float = 1.0,
        process_set: ProcessSet = global_process_set,
        inplace: bool = False,
    ) -> list[int]:
        """Allreduces a list as one unit: negotiated together and executed in one cycle.

        :param average: |shared|
        :param name: |shared:group_name|
        :param op: the reduction (``Average``, ``Sum``, ``Min``, ``Max``, ``Product``); the engine refuses those it does
            not run (``ValueError``): framework adapters check first, with ``check_reduce_op``.
        :param prescale_factor: |shared|
        :param postscale_factor: |shared|
        :param process_set: |shared|
        :param inplace: write the result into the input tensor itself instead of a new one.
        :param tensors: the tensors, of the adapter's type, reduced as one group.
        """
        op = handle_average_backwards_compatibility(op, average)
        return self._grouped(
            "grouped_allreduce",
            _core.OP_ALLREDUCE,
            tensors,
            name,
            process_set,
            lambda t, n, g: self.submit_allreduce(t, n, op, prescale_factor, postscale_factor, process_set, inplace, g),
        )

    @shared_parameters
    def allgather_async(
        self,
        tensor: Any,
        name: str | None = None,
        process_set: ProcessSet = global_process_set,
        group: tuple[int, int] = _NO_GROUP,
    ) -> int:
        """Starts an allgather: the result is every rank's ``tensor`` concatenated along the first
        dimension, in rank order. Returns a handle.

        :param tensor: the tensor, of the adapter's type. Its first dimension may differ between ranks; the others must
            match.
        :param name: |shared|
        :param process_set: |shared|
        :param group: for framework code: ``(group id, group size)`` of a group the operation belongs to, as
            ``group_names`` gives; by default it belongs to none.
        """
        return self._submit(
            _core.OP_ALLGATHER,
            tensor,
            name or state.context().auto_name("allgather"),
            process_set,
            output_like_input=False,
            group=group,
        )

    @shared_parameters
    def grouped_allgather_async(
        self, tensors: Sequence[Any], name: str | None = None, process_set: ProcessSet = global_process_set
    ) -> list[int]:
        """Starts an allgather of each of ``tensors``, negotiated and run together; returns one handle each.

        :param tensors: the tensors gathered as one group.
        :param name: |shared:group_name|
        :param process_set: |shared|
        """
        return self._grouped(
            "grouped_allgather",
            _core.OP_ALLGATHER,
            tensors,
            name,
            process_set,
            lambda t, n, g: self.allgather_async(t, n, process_set, g),
        )

    @shared_parameters
    def broadcast_async(
        self,
        tensor: Any,
        root_rank: int,
        name: str | None = None,
        process_set: ProcessSet = global_process_set,
        inplace: bool = False,
    ) -> int:
        """Starts a broadcast of ``root_rank``'s ``tensor`` to every rank; returns a handle.

        :param tensor: the tensor, of the adapter's type. The root's is sent; the others' give the shape and dtype.
        :param root_rank: |shared|
        :param name: |shared|
        :param process_set: |shared|
        :param inplace: write the result into the input tensor itself instead of a new one.
        """
        return self._submit(
            _core.OP_BROADCAST,
            tensor,
            name or state.context().auto_name("broadcast"),
            process_set,
            output_like_input=True,
            inplace=inplace,
            root=int(root_rank),
        )

    @shared_parameters
    def alltoall_async(
        self,
        tensor: Any,
        splits: Sequence[int] | Any = None,
        name: str | None = None,
        process_set: ProcessSet = global_process_set,
    ) -> int:
        """Result: (received tensor, received splits as a list of ints).

        :param tensor: the tensor, of the adapter's type. Slices of its first dimension are sent to the ranks.
        :param splits: how many slices (along the first dimension) go to each rank of the set, in rank order; they must
            sum to the first dimension. By default the tensor is split into equal parts, one per rank (its first
            dimension must then divide evenly). A list or a tensor of integers.
        :param name: |shared|
        :param process_set: |shared|
        """
        name = name or state.context().auto_name("alltoall")
        split_list = None if splits is None else integer_splits(splits, f"alltoall of tensor '{name}'")
        a = self.adapter
        return self._submit(
            _core.OP_ALLTOALL,
            tensor,
            name,
            process_set,
            output_like_input=False,
            finish=lambda h, prepared, out: (a.from_engine(h, prepared), list(h.received_splits)),
            splits=split_list,
        )

    @shared_parameters
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
        """Starts a reducescatter; returns a handle, whose result is this rank's slice of the reduction.

        :param tensor: the tensor, of the adapter's type. Reduced over the ranks; each rank gets a slice of the first
            dimension (it need not divide evenly).
        :param name: |shared|
        :param op: the reduction (``Average``, ``Sum``, ``Min``, ``Max``, ``Product``); the engine refuses those it does
            not run (``ValueError``): framework adapters check first, with ``check_reduce_op``.
        :param process_set: |shared|
        :param prescale_factor: |shared|
        :param postscale_factor: |shared|
        :param group: for framework code: ``(group id, group size)`` of a group the operation belongs to, as
            ``group_names`` gives; by default it belongs to none.
        """
        return self._submit(
            _core.OP_REDUCESCATTER,
            tensor,
            name or state.context().auto_name("reducescatter"),
            process_set,
            output_like_input=False,
            op=op,
            prescale=float(prescale_factor),
            postscale=float(postscale_factor),
            group=group,
        )

    @shared_parameters
    def grouped_reducescatter_async(
        self,
        tensors: Sequence[Any],
        name: str | None = None,
        op: int = Average,
        process_set: ProcessSet = global_process_set,
        prescale_factor: float = 1.0,
        postscale_factor: float = 1.0,
    ) -> list[int]:
        """Starts a reducescatter of each of ``tensors``, negotiated and run together; returns one handle each.

        :param tensors: the tensors reduced and scattered as one group.
        :param name: |shared:group_name|
        :param op: the reduction (``Average``, ``Sum``, ``Min``, ``Max``, ``Product``); the engine refuses those it does
            not run (``ValueError``): framework adapters check first, with ``check_reduce_op``.
        :param process_set: |shared|
        :param prescale_factor: |shared|
        :param postscale_factor: |shared|
        """
        return self._grouped(
            "grouped_reducescatter",
            _core.OP_REDUCESCATTER,
            tensors,
            name,
            process_set,
            lambda t, n, g: self.reducescatter_async(t, n, op, process_set, prescale_factor, postscale_factor, g),
        )


def non_integer_splits_error(what: str, got: str) -> ValueError:
    """The error for splits that are not integers: a float split would be truncated, moving other
    rows than asked.

    :param what: the operation and its tensor, e.g. ``"alltoall of tensor 'x'"``.
    :param got: what was given instead, e.g. ``"a tensor of float32"``.
    """
    return ValueError(f"{what}: splits must be integers, got {got}")


def integer_splits(splits: Any, what: str) -> list[int]:
    """``splits`` as a list of ints; any value that is not an integer raises
    :func:`non_integer_splits_error`.

    :param splits: a list, a tuple, or an array or tensor with ``tolist``, of integers.
    :param what: the operation and its tensor, for the error.
    """
    values = _flatten(splits)
    for position, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise non_integer_splits_error(what, f"{value!r} ({type(value).__name__}) at position {position}")
    return [int(v) for v in values]


def _flatten(values: Any) -> list[Any]:
    if hasattr(values, "tolist"):
        values = values.tolist()
    out: list[Any] = []
    for v in values if isinstance(values, (list, tuple)) else [values]:
        out.extend(_flatten(v) if isinstance(v, (list, tuple)) else [v])
    return out


# Tensor-free operations, the same for every framework.


@shared_parameters
def barrier(process_set: ProcessSet = global_process_set) -> None:
    """Blocks until every rank of the process set has reached the barrier.

    :param process_set: |shared|
    """
    ctx = state.context()
    core = ctx.engine.enqueue(_core.OP_BARRIER, "barrier", None, 0, [], process_set=process_set_id(process_set))
    ctx.synchronize(ctx.submit(core))


def join(device: int = -1) -> int:
    """Declares this rank done: until every rank has joined it contributes neutral data to the
    others' collectives. Returns the rank that joined last.

    :param device: accepted for Horovod's signature (the device whose neutral data a joined rank contributes); hvd's
        engine does not use it.
    """
    ctx = state.context()
    core = ctx.engine.enqueue(_core.OP_JOIN, "join", None, 0, [])
    last: int = ctx.synchronize(ctx.submit(core, lambda h, kept, out: int(h.value)))
    return last


def poll(handle: int) -> bool:
    """True when the operation behind ``handle`` has completed (never blocks).

    :param handle: the handle an ``*_async`` function returned.
    """
    return state.context().poll(handle)


def synchronize(handle: int) -> Any:
    """Waits for the operation behind ``handle`` and returns its result (raises its error).

    :param handle: the handle an ``*_async`` function returned. A handle can be synchronized once.
    """
    return state.context().synchronize(handle)
