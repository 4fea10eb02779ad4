"""Gradients of the differentiable collectives: Horovod's definitions, checked on 2 and 3 ranks.

Rank r's loss is ``sum(w_r * y_r)`` for its output ``y_r``, so its incoming gradient is ``w_r``,
which every rank can compute. Horovod (0.28.1, ``horovod/torch/mpi_ops.py``) defines each backward
as a collective on the incoming gradients, not as the local derivative: allreduce -> the same
allreduce; alltoall -> alltoall back; allgather -> Average allreduce, this rank's rows; broadcast ->
Average allreduce, times 0 except on the root; reducescatter -> allgather, times the set's size for
Sum (not for Average), times the pre- and postscale factors. The references below are written
from those definitions; each is also compared with the "true" gradient of the job's total loss
(the sum over ranks, by autograd on a local simulation of the collective): equal for allreduce and
alltoall, 1/n of it for allgather and broadcast, n times it for reducescatter.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import horovod.torch as hvd
from hvdtorch_testutil import cluster, seeded

NP = [2, 3]


def true_gradients(
    n: int, shape_of: Callable[[int], tuple], simulate: Callable, out_shape_of: Callable[[int], tuple]
) -> list:
    xs = [seeded(shape_of(r), seed=r).requires_grad_() for r in range(n)]
    ys = simulate(xs)
    total = sum((seeded(out_shape_of(j), seed=100 + j) * ys[j]).sum() for j in range(n))
    return list(torch.autograd.grad(total, xs, allow_unused=True))


def incoming(rank: int, shape: tuple) -> torch.Tensor:
    """Rank ``rank``'s incoming gradient (the weights of its loss) for an output of ``shape``."""
    return seeded(shape, seed=100 + rank)


def own_loss_backward(rank: int, x: torch.Tensor, y: torch.Tensor) -> None:
    (incoming(rank, tuple(y.shape)) * y).sum().backward()


def assert_grad(actual: torch.Tensor | None, expected: torch.Tensor, what: str) -> None:
    assert actual is not None, f"{what}: no gradient"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} vs {expected.shape}"
    assert torch.allclose(actual, expected, atol=1e-10), f"{what}: {actual.flatten()[:6]} vs {expected.flatten()[:6]}"


# --- allreduce --------------------------------------------------------------------------------------


def case_allreduce_grad() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    shape = (3, 4)
    for op, pre, post in ((hvd.Sum, 1.0, 1.0), (hvd.Average, 1.0, 1.0), (hvd.Sum, 2.0, 0.25), (hvd.Average, 0.5, 3.0)):

        def simulate(xs, op=op, pre=pre, post=post):
            total = sum(pre * x for x in xs) * post
            return [total / n if op == hvd.Average else total] * n

        x = seeded(shape, seed=rank).requires_grad_()
        y = hvd.allreduce(x, op=op, prescale_factor=pre, postscale_factor=post, name=f"grad.ar.{op}.{pre}")
        own_loss_backward(rank, x, y)
        expected = true_gradients(n, lambda r: shape, simulate, lambda r: shape)[rank]
        assert_grad(x.grad, expected, f"allreduce op={op} pre={pre} post={post}")
    # Min/Max: Horovod's gradient is the incoming gradients reduced with the same op.
    x = seeded(shape, seed=rank).requires_grad_()
    own_loss_backward(rank, x, hvd.allreduce(x, op=hvd.Max, name="grad.ar.max"))
    expected = torch.stack([seeded(shape, seed=100 + r) for r in range(n)]).amax(0)
    assert_grad(x.grad, expected, "allreduce Max")
    # With compression the gradient flows through the casts.
    x = seeded(shape, seed=rank, dtype=torch.float32).requires_grad_()
    y = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16, name="grad.ar.fp16")
    assert y.dtype == torch.float32
    y.sum().backward()
    assert x.grad.dtype == torch.float32 and x.grad.tolist() == [[float(n)] * 4] * 3


def case_grouped_allreduce_grad() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    shapes = [(2, 3), (5,)]
    xs = [seeded(s, seed=10 * rank + i).requires_grad_() for i, s in enumerate(shapes)]
    ys = hvd.grouped_allreduce(xs, op=hvd.Average, name="grad.gar")
    sum((seeded(tuple(y.shape), seed=100 + 10 * rank + i) * y).sum() for i, y in enumerate(ys)).backward()
    for i, (x, s) in enumerate(zip(xs, shapes, strict=True)):
        expected = sum(seeded(s, seed=100 + 10 * r + i) for r in range(n)) / n
        assert_grad(x.grad, expected, f"grouped allreduce #{i}")


@pytest.mark.parametrize("np_", NP)
def test_allreduce_gradients(np_: int) -> None:
    cluster(case_allreduce_grad, np_)


@pytest.mark.parametrize("np_", NP)
def test_grouped_allreduce_gradients(np_: int) -> None:
    cluster(case_grouped_allreduce_grad, np_)


# --- allgather, broadcast ---------------------------------------------------------------------------


def case_allgather_grad() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()

    def rows(r: int) -> tuple[int, int]:  # an uneven first dimension
        return (r + 1, 3)

    total_rows = (sum(r + 1 for r in range(n)), 3)
    x = seeded(rows(rank), seed=rank).requires_grad_()
    own_loss_backward(rank, x, hvd.allgather(x, name="grad.ag"))
    expected = true_gradients(n, rows, lambda xs: [torch.cat(xs)] * n, lambda r: total_rows)[rank] / n
    assert_grad(x.grad, expected, "allgather")
    start = sum(r + 1 for r in range(rank))
    horovods = (sum(incoming(j, total_rows) for j in range(n)) / n)[start : start + rank + 1]
    assert_grad(x.grad, horovods, "allgather, Horovod's definition")
    # Grouped.
    xs = [seeded(rows(rank), seed=rank).requires_grad_(), seeded((1, 2), seed=50 + rank).requires_grad_()]
    ys = hvd.grouped_allgather(xs, name="grad.gag")
    (seeded(total_rows, seed=100 + rank) * ys[0]).sum().backward(retain_graph=True)
    assert_grad(xs[0].grad, expected, "grouped allgather")
    assert xs[1].grad is None or bool((xs[1].grad == 0).all())


def case_broadcast_grad() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    shape = (2, 3)
    for root in range(n):
        x = seeded(shape, seed=rank).requires_grad_()
        own_loss_backward(rank, x, hvd.broadcast(x, root, name=f"grad.bc.{root}"))
        expected = true_gradients(n, lambda r: shape, lambda xs, root=root: [xs[root]] * n, lambda r: shape)[rank]
        expected = torch.zeros(shape, dtype=torch.float64) if expected is None else expected / n
        assert_grad(x.grad, expected, f"broadcast root={root}")
        horovods = sum(incoming(j, shape) for j in range(n)) / n * (1 if rank == root else 0)
        assert_grad(x.grad, horovods, f"broadcast root={root}, Horovod's definition")
    # Non-roots get the average times 0, not zeros: a non-finite gradient on any rank (here the last
    # one's) makes every rank's gradient non-finite, as in Horovod.
    x = seeded(shape, seed=rank).requires_grad_()
    y = hvd.broadcast(x, 0, name="grad.bc.inf")
    w = torch.zeros(shape, dtype=torch.float64)
    if rank == n - 1:
        w[0, 0] = float("inf")
    y.backward(w)
    assert x.grad is not None and x.grad.flatten()[1:].eq(0).all()
    corner = x.grad[0, 0].item()
    assert corner == float("inf") if rank == 0 else corner != corner, (rank, corner)  # NaN off the root


@pytest.mark.parametrize("np_", NP)
def test_allgather_gradients(np_: int) -> None:
    cluster(case_allgather_grad, np_)


@pytest.mark.parametrize("np_", NP)
def test_broadcast_gradients(np_: int) -> None:
    cluster(case_broadcast_grad, np_)


# --- alltoall, reducescatter ------------------------------------------------------------------------


def case_alltoall_grad() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()

    def splits_of(r: int) -> list[int]:
        return [(r + i) % 3 + 1 for i in range(n)]

    def simulate(xs):
        outs = []
        for j in range(n):
            outs.append(torch.cat([xs[r][sum(splits_of(r)[:j]) :][: splits_of(r)[j]] for r in range(n)]))
        return outs

    def shape_of(r: int) -> tuple[int, int]:
        return (sum(splits_of(r)), 2)

    def out_shape_of(j: int) -> tuple[int, int]:
        return (sum(splits_of(r)[j] for r in range(n)), 2)

    x = seeded(shape_of(rank), seed=rank).requires_grad_()
    y, received_splits = hvd.alltoall(x, splits=splits_of(rank), name="grad.a2a")
    assert not received_splits.requires_grad
    own_loss_backward(rank, x, y)
    assert_grad(x.grad, true_gradients(n, shape_of, simulate, out_shape_of)[rank], "alltoall")
    # Without splits (equal parts) the single returned tensor is differentiable too.
    x = seeded((2 * n, 2), seed=rank).requires_grad_()
    hvd.alltoall(x, name="grad.a2a.even").sum().backward()
    assert x.grad.tolist() == [[1.0, 1.0]] * (2 * n)


def horovod_reducescatter_grad(g: torch.Tensor, op: int, set_size: int, pre: float, post: float) -> torch.Tensor:
    """The part of a reducescatter's backward one rank's incoming gradient ``g`` gives, as Horovod
    writes it: times the set's size for Sum (not for Average), then times each scale factor."""
    if op == hvd.Sum:
        g = g * set_size
    if pre != 1.0:
        g = g * pre
    if post != 1.0:
        g = g * post
    return g


def case_reducescatter_grad() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    rows = 2 * n + 1
    counts = [rows // n + (1 if r < rows % n else 0) for r in range(n)]
    starts = [sum(counts[:r]) for r in range(n)]
    cases = ((hvd.Sum, 1.0, 1.0), (hvd.Average, 1.0, 1.0), (hvd.Sum, 2.0, 0.25), (hvd.Average, 2.0, 0.5))
    for op, pre, post in cases:

        def simulate(xs, op=op, pre=pre, post=post):
            total = sum(pre * x for x in xs) * post
            total = total / n if op == hvd.Average else total
            return [total[starts[j] : starts[j] + counts[j]] for j in range(n)]

        # Every rank's incoming gradient, allgathered, each scaled as Horovod does (to the bit).
        expected = torch.cat(
            [horovod_reducescatter_grad(incoming(j, (counts[j], 2)), op, n, pre, post) for j in range(n)]
        )
        true = true_gradients(n, lambda r: (rows, 2), simulate, lambda j: (counts[j], 2))[rank]
        assert torch.allclose(expected, n * true, atol=1e-10)  # n times the local derivative, for both ops
        x = seeded((rows, 2), seed=rank).requires_grad_()
        y = hvd.reducescatter(x, op=op, prescale_factor=pre, postscale_factor=post, name=f"grad.rs.{op}.{pre}")
        own_loss_backward(rank, x, y)
        assert x.grad is not None and torch.equal(x.grad, expected), f"reducescatter op={op} pre={pre} post={post}"
        xs = [seeded((rows, 2), seed=rank).requires_grad_(), seeded((n, 3), seed=50 + rank).requires_grad_()]
        ys = hvd.grouped_reducescatter(
            xs, op=op, prescale_factor=pre, postscale_factor=post, name=f"grad.grs.{op}.{pre}"
        )
        (incoming(rank, tuple(ys[0].shape)) * ys[0]).sum().backward(retain_graph=True)
        (incoming(10 + rank, tuple(ys[1].shape)) * ys[1]).sum().backward()
        second = torch.cat([horovod_reducescatter_grad(incoming(10 + j, (1, 3)), op, n, pre, post) for j in range(n)])
        assert xs[0].grad is not None and torch.equal(xs[0].grad, expected), f"grouped reducescatter op={op} #0"
        assert xs[1].grad is not None and torch.equal(xs[1].grad, second), f"grouped reducescatter op={op} #1"


@pytest.mark.parametrize("np_", NP)
def test_alltoall_gradients(np_: int) -> None:
    cluster(case_alltoall_grad, np_)


@pytest.mark.parametrize("np_", NP)
def test_reducescatter_gradients(np_: int) -> None:
    cluster(case_reducescatter_grad, np_)


# --- within a process set ---------------------------------------------------------------------------


def case_process_set_grads() -> None:
    """In a process set the definitions use the set: its size, its members' gradients, and this
    rank's position among them (the root of a broadcast is still a global rank)."""
    evens, odds = hvd.ProcessSet([0, 2]), hvd.ProcessSet([1])
    hvd.init(process_sets=[evens, odds])
    rank = hvd.rank()
    mine = evens if rank % 2 == 0 else odds
    members, position = mine.ranks, mine.ranks.index(rank)
    k = len(members)
    # reducescatter (Sum: times the set's size), one row per member
    x = seeded((k, 2), seed=rank).requires_grad_()
    own_loss_backward(rank, x, hvd.reducescatter(x, op=hvd.Sum, process_set=mine, name="ps.grad.rs"))
    expected = torch.cat([incoming(j, (1, 2)) * k for j in members])
    assert x.grad is not None and torch.equal(x.grad, expected), ("reducescatter", rank, x.grad, expected)
    # allgather: the members' gradients averaged, this member's rows (rank r has r + 1 rows)
    x = seeded((rank + 1, 2), seed=rank).requires_grad_()
    total = (sum(r + 1 for r in members), 2)
    own_loss_backward(rank, x, hvd.allgather(x, process_set=mine, name="ps.grad.ag"))
    start = sum(r + 1 for r in members[:position])
    expected = (sum(incoming(j, total) for j in members) / k)[start : start + rank + 1]
    assert_grad(x.grad, expected, f"allgather in {members}")
    # broadcast from the set's last member
    root = members[-1]
    x = seeded((3,), seed=rank).requires_grad_()
    own_loss_backward(rank, x, hvd.broadcast(x, root, process_set=mine, name="ps.grad.bc"))
    expected = sum(incoming(j, (3,)) for j in members) / k * (1 if rank == root else 0)
    assert_grad(x.grad, expected, f"broadcast in {members} from {root}")
    hvd.barrier()


def test_process_set_gradients() -> None:
    cluster(case_process_set_grads, 3)


def case_second_order() -> None:
    """The backward passes are themselves differentiable collectives (double backward works)."""
    hvd.init()
    n = hvd.size()
    x = torch.full((2,), 1.0 + hvd.rank(), dtype=torch.float64, requires_grad=True)
    y = hvd.allreduce(x, op=hvd.Sum, name="grad2.ar")  # S = sum of every rank's x
    (g,) = torch.autograd.grad((y * y).sum(), x, create_graph=True)  # allreduce(2 S) = 2 n S
    assert torch.allclose(g, torch.full((2,), 2.0 * n * sum(1.0 + r for r in range(n)), dtype=torch.float64))
    g.sum().backward()  # through both allreduces again: 2 n * n
    assert x.grad.tolist() == [2.0 * n * n] * 2


def test_double_backward() -> None:
    cluster(case_second_order, 2)


# --- where nothing is recorded ----------------------------------------------------------------------


def case_unrecorded() -> None:
    """Where autograd records nothing (gradients off, or inputs that need none), the differentiable
    collectives skip its bookkeeping: the same results, with no graph; where it records, a graph."""
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    calls = {
        "allreduce": lambda x, tag: hvd.allreduce(x, op=hvd.Sum, name=f"u.ar.{tag}"),
        "allreduce fp16": lambda x, tag: hvd.allreduce(x, compression=hvd.Compression.fp16, name=f"u.arc.{tag}"),
        "grouped_allreduce": lambda x, tag: hvd.grouped_allreduce([x, 2 * x], name=f"u.gar.{tag}"),
        "allgather": lambda x, tag: hvd.allgather(x, name=f"u.ag.{tag}"),
        "grouped_allgather": lambda x, tag: hvd.grouped_allgather([x, x[:1]], name=f"u.gag.{tag}"),
        "broadcast": lambda x, tag: hvd.broadcast(x, n - 1, name=f"u.bc.{tag}"),
        "alltoall": lambda x, tag: hvd.alltoall(x, name=f"u.a2a.{tag}"),
        "alltoall splits": lambda x, tag: hvd.alltoall(
            x, splits=torch.tensor([2] * n, dtype=torch.int64), name=f"u.a2as.{tag}"
        ),
        "reducescatter": lambda x, tag: hvd.reducescatter(x, op=hvd.Sum, name=f"u.rs.{tag}"),
        "grouped_reducescatter": lambda x, tag: hvd.grouped_reducescatter([x, x], name=f"u.grs.{tag}"),
    }

    def tensors_of(result) -> list[torch.Tensor]:
        return list(result) if isinstance(result, (list, tuple)) else [result]

    for what, call in calls.items():
        x = seeded((2 * n, 3), seed=rank).requires_grad_()
        recorded = tensors_of(call(x, "recorded"))
        with torch.no_grad():
            off = tensors_of(call(x, "no_grad"))
        detached = tensors_of(call(x.detach(), "detached"))
        assert recorded[0].grad_fn is not None, f"{what}: no graph recorded for an input that needs gradients"
        for other, how in ((off, "under no_grad"), (detached, "for a detached input")):
            assert len(other) == len(recorded), f"{what} {how}: {len(other)} results, expected {len(recorded)}"
            for got, want in zip(other, recorded, strict=True):
                assert got.grad_fn is None and not got.requires_grad, f"{what} {how}: a graph was recorded"
                assert got.dtype == want.dtype and torch.equal(got, want.detach()), f"{what} {how}: {got} vs {want}"
        if what == "alltoall splits":
            assert off[1].dtype == torch.int64 and off[1].tolist() == [2] * n, off[1]


def test_collectives_outside_autograd_give_the_same_results() -> None:
    cluster(case_unrecorded, 2)
