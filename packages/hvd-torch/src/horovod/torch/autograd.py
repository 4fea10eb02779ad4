"""The autograd Functions behind horovod.torch's synchronous collectives, with Horovod's gradients.

:mod:`horovod.torch.mpi_ops` runs each synchronous collective as one of these Functions (through
:func:`differentiable`), so ``torch.autograd`` sees Horovod's gradients, which are not all the local
derivatives: allreduce -> allreduce with the same op and scale factors; allgather -> Average
allreduce of the gradient, then this rank's rows; broadcast -> Average allreduce of the gradient,
times 0 except on the root; alltoall -> alltoall back with the received splits; reducescatter ->
allgather of the gradient times the set's size for Sum (not for Average), times the pre- and
postscale factors. The backward passes run these same Functions, so they are differentiable too,
and every rank must run backward through them in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from horovod.common import framework_api as api
from horovod.common.framework_api import Average, ProcessSet, Sum
from horovod.torch.async_ops import (
    allgather_async,
    broadcast_async,
    collectives,
    grouped_allgather_async,
    grouped_reducescatter_async,
    reducescatter_async,
    splits_tensor,
    submit_allreduce,
    submit_grouped_allreduce,
    synchronize,
)

# Each Function declares, for type checkers only, the signature of its `apply` (torch's is untyped: it passes
# its arguments to `forward`); `ctx` is torch's per-call context, where forward keeps what backward
# needs as attributes of its own choosing (hence Any).
#
# Gradients, one per forward argument after ctx (None for the non-tensor ones).
_Grads = tuple[torch.Tensor | None, ...]


class _UnrecordedContext:
    """Takes the notes a Function's forward makes for its backward when there will be none."""

    def mark_non_differentiable(self, *tensors: torch.Tensor) -> None:
        pass


def differentiable(function: Any, tensors: Sequence[torch.Tensor], *args: Any) -> Any:
    """``function.apply(*args)``, where autograd records it: gradients are on and one of ``tensors``
    (the inputs) requires one. Otherwise its forward alone, with the same result: recording an op
    costs tens of microseconds a call (more than the engine's own work for a small tensor on one host),
    which inference, evaluation and benchmarks need not pay. (Not a tensor: forward's adapter says
    what is wrong with it.)"""
    if torch.is_grad_enabled() and any(getattr(t, "requires_grad", False) for t in tensors):
        return function.apply(*args)
    return function.forward(_UnrecordedContext(), *args)


class Allreduce(torch.autograd.Function):
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
            submit_allreduce(tensor, name, op, prescale_factor, postscale_factor, process_set, False)
        )
        return reduced

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> _Grads:
        op, prescale_factor, postscale_factor, process_set = ctx.args
        grad = _allreduce(grad_output, op, process_set, prescale_factor, postscale_factor)
        return grad, None, None, None, None, None


class GroupedAllreduce(torch.autograd.Function):
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
        handle = submit_grouped_allreduce(tensors, name, op, prescale_factor, postscale_factor, process_set, False)
        return tuple(synchronize(handle))

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> _Grads:
        op, prescale_factor, postscale_factor, process_set = ctx.args
        grads = _grouped_allreduce(grad_outputs, op, process_set, prescale_factor, postscale_factor)
        return (None, None, None, None, None, *grads)


def _row_offsets(rows: list[int], process_set: ProcessSet) -> list[int]:
    """Where this rank's rows start in allgathered tensors, given its row count for each."""
    counts = _grouped_allgather([torch.tensor([n], dtype=torch.int64) for n in rows], process_set)
    own = api.set_rank(process_set)
    return [int(c[:own].sum()) for c in counts]


class Allgather(torch.autograd.Function):
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
        reduced = _allreduce(grad_output, Average, ctx.process_set)
        (offset,) = _row_offsets([ctx.rows], ctx.process_set)
        return reduced.narrow(0, offset, ctx.rows), None, None


class GroupedAllgather(torch.autograd.Function):
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
        reduced = _grouped_allreduce(grad_outputs, Average, ctx.process_set)
        offsets = _row_offsets(ctx.rows, ctx.process_set)
        return (None, None, *[g.narrow(0, o, n) for g, o, n in zip(reduced, offsets, ctx.rows, strict=True)])


class Broadcast(torch.autograd.Function):
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
        reduced = _allreduce(grad_output, Average, ctx.process_set)
        if api.rank() != ctx.root_rank:  # a global rank, as Horovod's root_rank is
            # Times 0 (Horovod's definition), not zeros: a non-finite gradient on any rank makes
            # every rank's gradient NaN, so that all ranks see it (e.g. to skip the step alike).
            reduced = reduced * 0
        return reduced, None, None, None


class Alltoall(torch.autograd.Function):
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
        output, received = synchronize(collectives.alltoall_async(tensor, splits, name=name, process_set=process_set))
        ctx.received_splits, ctx.process_set = received, process_set
        if splits is None:
            return output
        received_splits = splits_tensor(received, splits)
        ctx.mark_non_differentiable(received_splits)
        return output, received_splits

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor, *unused: torch.Tensor) -> _Grads:
        grad, _ = _alltoall(grad_output, ctx.received_splits, ctx.process_set)
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


class Reducescatter(torch.autograd.Function):
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
        grad = _allgather(_scaled(grad_output, ctx.factors), ctx.process_set)
        return grad, None, None, None, None, None


class GroupedReducescatter(torch.autograd.Function):
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
        grads = _grouped_allgather([_scaled(g, ctx.factors) for g in grad_outputs], ctx.process_set)
        return (None, None, None, None, None, *grads)


# The backward passes' collectives: the Functions themselves, as the public synchronous forms run
# them (their arguments were checked when forward ran).
def _allreduce(
    tensor: torch.Tensor, op: int, process_set: ProcessSet, prescale_factor: float = 1.0, postscale_factor: float = 1.0
) -> torch.Tensor:
    reduced: torch.Tensor = differentiable(
        Allreduce, [tensor], tensor, None, op, prescale_factor, postscale_factor, process_set
    )
    return reduced


def _grouped_allreduce(
    tensors: Sequence[torch.Tensor],
    op: int,
    process_set: ProcessSet,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
) -> tuple[torch.Tensor, ...]:
    return tuple(
        differentiable(GroupedAllreduce, tensors, None, op, prescale_factor, postscale_factor, process_set, *tensors)
    )


def _allgather(tensor: torch.Tensor, process_set: ProcessSet) -> torch.Tensor:
    gathered: torch.Tensor = differentiable(Allgather, [tensor], tensor, None, process_set)
    return gathered


def _grouped_allgather(tensors: Sequence[torch.Tensor], process_set: ProcessSet) -> tuple[torch.Tensor, ...]:
    return tuple(differentiable(GroupedAllgather, tensors, None, process_set, *tensors))


def _alltoall(tensor: torch.Tensor, splits: Any, process_set: ProcessSet) -> tuple[torch.Tensor, torch.Tensor]:
    exchanged: tuple[torch.Tensor, torch.Tensor] = differentiable(Alltoall, [tensor], tensor, splits, None, process_set)
    return exchanged
