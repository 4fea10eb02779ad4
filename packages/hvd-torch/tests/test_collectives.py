"""Every collective of horovod.torch, for every dtype torch has on CPU, against local references."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest
import torch

import horovod.torch as hvd
from horovod.common.framework_api import DEVICE_CPU, DEVICE_CUDA
from hvdtorch_testutil import (
    ALL_DTYPES,
    assert_close,
    cluster,
    cluster_warnings,
    contribution,
    expect_error,
    ops_for,
    reference,
)

NP = [2, 3]


# --- allreduce --------------------------------------------------------------------------------------


def case_allreduce_every_dtype_and_op() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    for dtype in ALL_DTYPES:
        for op in ops_for(dtype):
            inputs = [contribution(r, (3, 5), dtype, small=op == hvd.Product) for r in range(n)]
            mine = inputs[rank].clone()
            result = hvd.allreduce(mine, op=op, name=f"ar.{dtype}.{op}")
            assert_close(result, reference(op, inputs), dtype, f"allreduce {dtype} op={op}")
            assert torch.equal(mine, inputs[rank]), "allreduce modified its input"
            handle = hvd.allreduce_async(mine, op=op, name=f"ar.async.{dtype}.{op}")
            assert_close(hvd.synchronize(handle), reference(op, inputs), dtype, f"allreduce_async {dtype} op={op}")
        if dtype != torch.bool:
            inputs = [contribution(r, (4,), dtype) for r in range(n)]
            for op in (hvd.Sum, hvd.Average):
                result = hvd.allreduce(
                    inputs[rank], op=op, prescale_factor=2.0, postscale_factor=0.5, name=f"ar.scaled.{dtype}.{op}"
                )
                assert_close(result, reference(op, inputs, 2.0, 0.5), dtype, f"scaled allreduce {dtype} op={op}")
    # Default op is Average; scalars and empty tensors are legal.
    assert hvd.allreduce(torch.tensor(float(rank)), name="ar.scalar").item() == pytest.approx((n - 1) / 2)
    assert hvd.allreduce(torch.zeros(0, 4), op=hvd.Sum, name="ar.empty").shape == (0, 4)


def case_allreduce_in_place() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    total = float(sum(range(n)))
    t = torch.full((3,), float(rank))
    assert hvd.allreduce_(t, op=hvd.Sum, name="ip.sync") is t and t.tolist() == [total] * 3
    t = torch.full((2, 2), float(rank), dtype=torch.float64)
    handle = hvd.allreduce_async_(t, op=hvd.Sum, name="ip.async")
    assert hvd.synchronize(handle) is t and t.tolist() == [[total] * 2] * 2
    # A non-contiguous view: the result lands in the viewed elements only.
    base = torch.full((3, 4), float(rank))
    view = base[:, ::2]
    assert not view.is_contiguous()
    assert hvd.allreduce_(view, op=hvd.Sum, name="ip.view") is view
    assert base[:, ::2].eq(total).all() and base[:, 1::2].eq(float(rank)).all(), base
    # A leaf that requires grad (as model parameters are) is updated in place too.
    leaf = torch.full((2,), float(rank), requires_grad=True)
    hvd.allreduce_(leaf, op=hvd.Sum, name="ip.leaf")
    assert leaf.tolist() == [total] * 2 and leaf.requires_grad
    # Grouped, in place.
    tensors = [torch.full((2,), float(rank)), torch.full((3,), rank, dtype=torch.int32)]
    results = hvd.grouped_allreduce_(tensors, op=hvd.Sum, name="ip.grouped")
    assert results[0] is tensors[0] and results[1] is tensors[1]
    assert tensors[0].tolist() == [total] * 2 and tensors[1].tolist() == [int(total)] * 3
    tensors = [torch.full((2,), float(rank))]
    assert hvd.synchronize(hvd.grouped_allreduce_async_(tensors, op=hvd.Max))[0] is tensors[0]
    assert tensors[0].tolist() == [float(n - 1)] * 2


def case_average_is_deprecated() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    ones = torch.full((2,), float(rank + 1))
    assert hvd.allreduce(ones, average=True, name="dep.avg").tolist() == [(n + 1) / 2] * 2
    assert hvd.allreduce(ones, average=False, name="dep.sum").tolist() == [n * (n + 1) / 2] * 2
    assert hvd.synchronize(hvd.allreduce_async(ones, average=False, name="dep.async")).tolist() == [n * (n + 1) / 2] * 2
    expect_error(ValueError, ("op and average",), lambda: hvd.allreduce(ones, average=True, op=hvd.Sum))


@pytest.mark.parametrize("np_", NP)
def test_allreduce_every_dtype_and_op(np_: int) -> None:
    cluster(case_allreduce_every_dtype_and_op, np_)


@pytest.mark.parametrize("np_", NP)
def test_allreduce_in_place(np_: int) -> None:
    cluster(case_allreduce_in_place, np_)


def test_average_argument_warns_and_maps_to_op() -> None:
    _, caught = cluster_warnings(case_average_is_deprecated, 2)
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning) and "average" in str(w.message)]
    assert len(deprecations) == 2 * 3, [str(w.message) for w in caught]  # 3 valid calls with average= per rank
    assert all(w.filename == __file__ for w in deprecations), {w.filename for w in deprecations}


# --- grouped ----------------------------------------------------------------------------------------


def case_grouped() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    dtypes = (torch.float32, torch.int64, torch.float64, torch.bfloat16)
    tensors = [contribution(rank, (i + 2,), dtype) for i, dtype in enumerate(dtypes)]
    results = hvd.grouped_allreduce(tensors, op=hvd.Sum, name="g.ar")
    assert isinstance(results, list) and len(results) == len(tensors)
    for i, (result, dtype) in enumerate(zip(results, dtypes, strict=True)):
        assert_close(
            result, reference(hvd.Sum, [contribution(r, (i + 2,), dtype) for r in range(n)]), dtype, f"grouped #{i}"
        )
    handle = hvd.grouped_allreduce_async(tensors, op=hvd.Average)
    assert isinstance(handle, int)
    averaged = hvd.synchronize(handle)
    assert_close(
        averaged[0],
        reference(hvd.Average, [contribution(r, (2,), dtypes[0]) for r in range(n)]),
        dtypes[0],
        "grouped async",
    )
    assert hvd.grouped_allreduce([]) == []

    gathered = hvd.grouped_allgather(
        [torch.full((rank + 1, 2), rank, dtype=torch.int32), torch.full((1,), float(rank))]
    )
    assert gathered[0].shape == (n * (n + 1) // 2, 2) and gathered[1].tolist() == [float(r) for r in range(n)]
    gathered = hvd.synchronize(hvd.grouped_allgather_async([torch.tensor([rank])]))
    assert gathered[0].tolist() == list(range(n))

    scattered = hvd.grouped_reducescatter([torch.ones(n, 2), torch.ones(n, dtype=torch.int64)], op=hvd.Sum)
    assert scattered[0].tolist() == [[float(n)] * 2] and scattered[1].tolist() == [n]
    scattered = hvd.synchronize(hvd.grouped_reducescatter_async([torch.ones(n, 2)], op=hvd.Average))
    assert scattered[0].tolist() == [[1.0, 1.0]]


@pytest.mark.parametrize("np_", NP)
def test_grouped(np_: int) -> None:
    cluster(case_grouped, np_)


# --- allgather, broadcast, alltoall, reducescatter --------------------------------------------------


def case_allgather() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    for dtype in ALL_DTYPES:
        # Rank r contributes r rows: the first dimension differs, and rank 0 sends none.
        inputs = [contribution(r, (r, 2, 3), dtype) for r in range(n)]
        result = hvd.allgather(inputs[rank], name=f"ag.{dtype}")
        assert_close(result, torch.cat(inputs), dtype, f"allgather {dtype}")
        result = hvd.synchronize(hvd.allgather_async(inputs[rank], name=f"ag.async.{dtype}"))
        assert_close(result, torch.cat(inputs), dtype, f"allgather_async {dtype}")
    expect_error(ValueError, ("at least one dimension",), lambda: hvd.allgather(torch.tensor(1.0)))


def case_broadcast() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    for dtype in ALL_DTYPES:
        for root in range(n):
            mine = contribution(rank, (4, 3), dtype)
            result = hvd.broadcast(mine, root_rank=root, name=f"bc.{dtype}.{root}")
            assert_close(result, contribution(root, (4, 3), dtype), dtype, f"broadcast {dtype} root={root}")
            assert torch.equal(mine, contribution(rank, (4, 3), dtype)), "broadcast modified its input"
            result = hvd.synchronize(hvd.broadcast_async(mine, root, name=f"bc.async.{dtype}.{root}"))
            assert_close(result, contribution(root, (4, 3), dtype), dtype, f"broadcast_async {dtype}")
            assert hvd.broadcast_(mine, root, name=f"bc.ip.{dtype}.{root}") is mine
            assert_close(mine, contribution(root, (4, 3), dtype), dtype, f"broadcast_ {dtype}")
            mine = contribution(rank, (4, 3), dtype)
            assert hvd.synchronize(hvd.broadcast_async_(mine, root)) is mine
            assert_close(mine, contribution(root, (4, 3), dtype), dtype, f"broadcast_async_ {dtype}")
    expect_error(ValueError, ("root rank", "out of range"), lambda: hvd.broadcast(torch.ones(2), root_rank=n))


def case_alltoall() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()

    def splits_of(r: int) -> list[int]:
        return [(r + i) % 3 for i in range(n)]

    for dtype in ALL_DTYPES:
        inputs = [contribution(r, (sum(splits_of(r)), 2), dtype) for r in range(n)]
        expected = torch.cat([inputs[r][sum(splits_of(r)[:rank]) :][: splits_of(r)[rank]] for r in range(n)])
        received, received_splits = hvd.alltoall(inputs[rank], splits=splits_of(rank), name=f"a2a.{dtype}")
        assert_close(received, expected, dtype, f"alltoall {dtype}")
        assert received_splits.dtype == torch.int32
        assert received_splits.tolist() == [splits_of(r)[rank] for r in range(n)]
        # Splits as a tensor: the received splits come back in its dtype.
        splits = torch.tensor(splits_of(rank), dtype=torch.int64)
        received, received_splits = hvd.alltoall(inputs[rank], splits=splits, name=f"a2a.t.{dtype}")
        assert_close(received, expected, dtype, f"alltoall tensor splits {dtype}")
        assert received_splits.dtype == torch.int64
        # Without splits: equal parts, and (as in Horovod) only the tensor is returned.
        even = [contribution(r, (2 * n, 3), dtype) for r in range(n)]
        received = hvd.alltoall(even[rank], name=f"a2a.even.{dtype}")
        assert_close(received, torch.cat([even[r][2 * rank : 2 * rank + 2] for r in range(n)]), dtype, "alltoall even")
        # Asynchronous: always (received, received_splits).
        received, received_splits = hvd.synchronize(hvd.alltoall_async(even[rank], name=f"a2a.async.{dtype}"))
        assert received.shape == (2 * n, 3) and received_splits.tolist() == [2] * n
    expect_error(ValueError, ("splits sum to",), lambda: hvd.alltoall(torch.ones(4), splits=[5] + [0] * (n - 1)))


def case_reducescatter() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    rows = 2 * n + 1  # uneven: the first rank gets one row more
    counts = [rows // n + (1 if r < rows % n else 0) for r in range(n)]
    start = sum(counts[:rank])
    for dtype in ALL_DTYPES:
        if dtype == torch.bool:
            continue
        for op in (hvd.Sum, hvd.Average):
            inputs = [contribution(r, (rows, 3), dtype) for r in range(n)]
            expected = reference(op, inputs)[start : start + counts[rank]]
            assert_close(
                hvd.reducescatter(inputs[rank], op=op, name=f"rs.{dtype}.{op}"), expected, dtype, f"rs {dtype} {op}"
            )
            handle = hvd.reducescatter_async(inputs[rank], name=f"rs.async.{dtype}.{op}", op=op)
            assert_close(hvd.synchronize(handle), expected, dtype, f"reducescatter_async {dtype} op={op}")
    inputs = [contribution(r, (rows, 2), torch.float32) for r in range(n)]
    result = hvd.reducescatter(inputs[rank], op=hvd.Sum, prescale_factor=3.0, postscale_factor=0.5, name="rs.scaled")
    assert_close(result, reference(hvd.Sum, inputs, 3.0, 0.5)[start : start + counts[rank]], torch.float32, "rs scaled")
    # Default op is Average.
    assert_close(
        hvd.reducescatter(inputs[rank], name="rs.default"),
        reference(hvd.Average, inputs)[start : start + counts[rank]],
        torch.float32,
        "rs default",
    )
    expect_error(ValueError, ("reducescatter supports",), lambda: hvd.reducescatter(torch.ones(n, 1), op=hvd.Max))


@pytest.mark.parametrize("np_", NP)
def test_allgather(np_: int) -> None:
    cluster(case_allgather, np_)


@pytest.mark.parametrize("np_", NP)
def test_broadcast(np_: int) -> None:
    cluster(case_broadcast, np_)


@pytest.mark.parametrize("np_", NP)
def test_alltoall(np_: int) -> None:
    cluster(case_alltoall, np_)


@pytest.mark.parametrize("np_", NP)
def test_reducescatter(np_: int) -> None:
    cluster(case_reducescatter, np_)


# --- sparse -----------------------------------------------------------------------------------------


def case_sparse_allreduce() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()

    def dense_of(r: int) -> torch.Tensor:
        d = torch.zeros(5, 3)
        d[r % 5] = float(r + 1)
        d[(r + 2) % 5, 1] = 10.0
        return d

    for op in (hvd.Sum, hvd.Average):
        expected = sum(dense_of(r) for r in range(n)) / (n if op == hvd.Average else 1)
        # As in Horovod, the handle is called for the result; it also goes to poll and synchronize.
        for wait in ("call", "synchronize", "poll"):
            handle = hvd.sparse_allreduce_async(dense_of(rank).to_sparse(), name=f"sp.{op}.{wait}", op=op)
            assert callable(handle) and isinstance(handle, int)
            if wait == "poll":
                while not hvd.poll(handle):
                    time.sleep(0.001)
            result = handle() if wait == "call" else hvd.synchronize(handle)
            assert result.is_sparse and result.shape == (5, 3)
            assert torch.allclose(result.to_dense(), expected), (wait, result.to_dense(), expected)
            expect_error(ValueError, ("already synchronized",), handle)  # one result per handle
    # How Horovod's DistributedOptimizer waits for a gradient's handle, sparse or dense.
    handles = [
        hvd.sparse_allreduce_async(dense_of(rank).to_sparse(), name="sp.opt", op=hvd.Sum),
        hvd.allreduce_async(dense_of(rank), name="sp.opt.dense", op=hvd.Sum),
    ]
    sparse, dense = [h() if callable(h) else hvd.synchronize(h) for h in handles]
    assert torch.equal(sparse.to_dense(), dense), (sparse.to_dense(), dense)
    for op in (hvd.Max, hvd.Adasum):  # refused before anything is submitted: sparse takes Sum and Average
        error = expect_error(
            hvd.UnsupportedOperationError,
            ("sparse_allreduce_async",),
            lambda op=op: hvd.sparse_allreduce_async(dense_of(rank).to_sparse(), name=f"sp.{op}", op=op),
        )
        assert "Average and op=Sum" in error or "Adasum" in error, error


@pytest.mark.parametrize("np_", NP)
def test_sparse_allreduce(np_: int) -> None:
    cluster(case_sparse_allreduce, np_)


# --- asynchronous handles, barrier, join ------------------------------------------------------------


def case_poll_before_completion() -> None:
    hvd.init()
    rank, n = hvd.rank(), hvd.size()
    hvd.barrier()
    # The op cannot complete before the last rank submits it: poll must say so, without blocking.
    if rank == 0:
        handle = hvd.allreduce_async(torch.ones(2), name="late", op=hvd.Sum)
        assert hvd.poll(handle) is False, "poll returned True before every rank had submitted"
        hvd.barrier()
    else:
        hvd.barrier()
        time.sleep(0.2)
        handle = hvd.allreduce_async(torch.ones(2), name="late", op=hvd.Sum)
    assert hvd.synchronize(handle).tolist() == [float(n)] * 2
    # The same for a grouped handle (several engine operations behind one handle).
    if rank == 0:
        handle = hvd.grouped_allreduce_async([torch.ones(1), torch.ones(2)], name="late.group", op=hvd.Sum)
        assert hvd.poll(handle) is False
        hvd.barrier()
    else:
        hvd.barrier()
        time.sleep(0.2)
        handle = hvd.grouped_allreduce_async([torch.ones(1), torch.ones(2)], name="late.group", op=hvd.Sum)
    assert [t.tolist() for t in hvd.synchronize(handle)] == [[float(n)], [float(n)] * 2]
    handles = [hvd.allreduce_async(torch.full((3,), float(i)), name=f"many.{i}", op=hvd.Sum) for i in range(20)]
    deadline = time.time() + 30
    while not all(hvd.poll(h) for h in handles):
        assert time.time() < deadline, "async allreduces did not complete"
        time.sleep(0.001)
    for i, h in enumerate(handles):
        assert hvd.synchronize(h).tolist() == [float(i * n)] * 3
    expect_error(ValueError, ("unknown or was already synchronized",), lambda: hvd.synchronize(handles[0]))
    expect_error(ValueError, ("unknown",), lambda: hvd.poll(10**9))


def case_join() -> int:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    for step in range(rank + 1):  # rank r takes r + 1 steps, then joins
        active = [r for r in range(n) if r + 1 > step]
        total = hvd.allreduce(torch.full((4,), float(rank + 1)), name="join.step", op=hvd.Sum)
        assert total.tolist() == [float(sum(r + 1 for r in active))] * 4, (step, total)
    last = hvd.join()
    assert last == n - 1, f"join returned {last}, expected {n - 1}"
    assert hvd.allreduce(torch.ones(1), name="join.after", op=hvd.Sum).tolist() == [float(n)]
    return last


@pytest.mark.parametrize("np_", NP)
def test_poll_is_false_before_completion(np_: int) -> None:
    cluster(case_poll_before_completion, np_)


@pytest.mark.parametrize("np_", NP)
def test_join(np_: int) -> None:
    assert cluster(case_join, np_) == [np_ - 1] * np_


def case_collectives_while_a_rank_has_joined(joiner: int) -> int:
    """Every collective completes while rank `joiner` has joined (Horovod refuses allgather,
    broadcast, alltoall and reducescatter then); what the joined rank contributes to each, as the
    package README says."""
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    if rank == joiner:
        return hvd.join()
    active = [r for r in range(n) if r != joiner]
    mine = float(rank + 2)

    def of_active(fn: Any, sign: float = 1.0) -> float:
        return float(fn(sign * (r + 2) for r in active))

    # allreduce: Sum and Average as if it gave zeros (Average still divides by every rank, n) ...
    assert hvd.allreduce(torch.full((2,), mine), op=hvd.Sum, name="j.sum").tolist() == [of_active(sum)] * 2
    average = hvd.allreduce(
        torch.full((2,), mine, dtype=torch.float64), prescale_factor=2.0, postscale_factor=3.0, name="j.avg"
    )
    assert torch.allclose(average, torch.full((2,), 2 * of_active(sum) * 3 / n, dtype=torch.float64)), average
    # ... while Min, Max and Product leave it out (its part is the op's identity, not zero).
    for op, fn in ((hvd.Min, min), (hvd.Max, max), (hvd.Product, math.prod)):
        for sign in (1.0, -1.0):
            result = hvd.allreduce(torch.full((1,), sign * mine), op=op, name=f"j.{op}.{sign}")
            assert result.item() == of_active(fn, sign), (op, sign, result)
    # allgather: no rows from it (grouped: the same for each tensor).
    gathered = hvd.allgather(torch.full((rank + 1, 2), float(rank)), name="j.ag")
    assert gathered[:, 0].tolist() == [float(r) for r in active for _ in range(r + 1)]
    grouped = hvd.grouped_allgather([torch.full((1,), mine), torch.full((2, 1), mine)], name="j.gag")
    expected = [[float(r + 2) for r in active], [float(r + 2) for r in active for _ in range(2)]]
    assert [g.flatten().tolist() for g in grouped] == expected, grouped
    # broadcast from a root that has not joined: as usual (the joined rank receives nothing).
    root = active[-1]
    assert hvd.broadcast(torch.full((3,), float(rank)), root, name="j.bc").tolist() == [float(root)] * 3
    # alltoall: it sends nothing (0 rows received from it); the rows sent to it are dropped.
    received, splits = hvd.alltoall(torch.arange(float(n)).unsqueeze(1) + 10 * rank, splits=[1] * n, name="j.a2a")
    assert splits.tolist() == [0 if r == joiner else 1 for r in range(n)], splits
    assert received[:, 0].tolist() == [10.0 * r + rank for r in active], received
    # reducescatter: zeros from it; the rows are still split over every rank (its slice is dropped),
    # and Average divides by every rank.
    rows = 2 * n + 1
    counts = [rows // n + (1 if r < rows % n else 0) for r in range(n)]
    start = sum(counts[:rank])
    for op in (hvd.Sum, hvd.Average):
        result = hvd.reducescatter(torch.arange(float(rows)).unsqueeze(1) + 10 * rank, op=op, name=f"j.rs.{op}")
        total = sum(torch.arange(float(rows)) + 10 * r for r in active) / (n if op == hvd.Average else 1)
        assert torch.allclose(result[:, 0], total[start : start + counts[rank]]), (op, result)
    # sparse_allreduce_async (allgathers): no entries from it; Average divides by every rank, as the
    # dense allreduce does.
    sparse = hvd.sparse_allreduce_async(torch.eye(n)[rank].to_sparse(), name="j.sp", op=hvd.Average)()
    assert torch.allclose(sparse.to_dense(), sum(torch.eye(n)[r] for r in active) / n)
    # A broadcast from the joined rank has no data to send: an error on every rank still taking part.
    expect_error(
        hvd.CollectiveMismatchError,
        (f"root rank {joiner}", "already joined"),
        lambda: hvd.broadcast(torch.zeros(1), joiner, name="j.bc.joined"),
    )
    return hvd.join()


@pytest.mark.parametrize("np_", NP)
@pytest.mark.parametrize("joiner", [0, 1])
def test_collectives_while_a_rank_has_joined(np_: int, joiner: int) -> None:
    last = cluster(case_collectives_while_a_rank_has_joined, np_, joiner)
    assert len(set(last)) == 1 and last[0] != joiner, last  # the same on every rank: one that joined later


# --- errors -----------------------------------------------------------------------------------------


def case_mismatches() -> None:
    """Disagreements raise RuntimeError on every rank, naming the tensor."""
    hvd.init()
    rank, n = hvd.rank(), hvd.size()
    odd = rank == n - 1  # the last rank disagrees with everybody else
    expect_error(
        RuntimeError, ("'mm.shape'", "shapes"), lambda: hvd.allreduce(torch.ones(3 if odd else 2), name="mm.shape")
    )
    expect_error(
        RuntimeError,
        ("'mm.dtype'", "data types"),
        lambda: hvd.allreduce(torch.ones(2, dtype=torch.float64 if odd else torch.float32), name="mm.dtype"),
    )
    expect_error(
        RuntimeError,
        ("'mm.op'", "reduce ops"),
        lambda: hvd.allreduce(torch.ones(2), name="mm.op", op=hvd.Max if odd else hvd.Sum),
    )
    expect_error(
        RuntimeError,
        ("'mm.root'", "root ranks"),
        lambda: hvd.broadcast(torch.ones(2), root_rank=1 if odd else 0, name="mm.root"),
    )
    expect_error(
        RuntimeError, ("'mm.gather'",), lambda: hvd.allgather(torch.ones(1, 3 if odd else 2), name="mm.gather")
    )
    expect_error(
        RuntimeError,
        ("'mm.async'", "shapes"),
        lambda: hvd.synchronize(hvd.allreduce_async_(torch.ones(3 if odd else 2), name="mm.async")),
    )
    expect_error(
        RuntimeError,
        ("'mm.group.1'",),
        lambda: hvd.grouped_allreduce([torch.ones(1), torch.ones(3 if odd else 2)], name="mm.group"),
    )
    # The engine is still healthy afterwards.
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="mm.after").tolist() == [float(n)]


def case_call_time_errors() -> None:
    """Misuse one rank can see by itself raises at once on that rank, naming what is wrong."""
    hvd.init()
    unsupported = [torch.complex64, torch.complex128, torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn]
    for dtype in unsupported:  # every other dtype torch has on CPU is refused, naming it
        # d=dtype: each lambda keeps this iteration's dtype (expect_error calls it at once anyway)
        expect_error(ValueError, (str(dtype), "not supported"), lambda d=dtype: hvd.allreduce(torch.zeros(2, dtype=d)))
        expect_error(ValueError, (str(dtype), "not supported"), lambda d=dtype: hvd.allgather(torch.zeros(2, dtype=d)))
    expect_error(TypeError, ("torch.Tensor",), lambda: hvd.allreduce([1.0, 2.0]))
    expect_error(
        ValueError, ("Adasum", "int32"), lambda: hvd.allreduce(torch.ones(2, dtype=torch.int32), op=hvd.Adasum)
    )
    expect_error(ValueError, ("bool",), lambda: hvd.allreduce(torch.ones(2, dtype=torch.bool), op=hvd.Sum))
    expect_error(ValueError, ("sparse",), lambda: hvd.allreduce(torch.ones(2, 2).to_sparse()))
    expect_error(ValueError, ("'meta'",), lambda: hvd.allreduce(torch.ones(2, device="meta")))
    # A name still in flight cannot be reused (rank 0 checks while the others wait to submit it).
    if hvd.rank() == 0:
        first = hvd.allreduce_async(torch.ones(1), name="dup")
        expect_error(
            ValueError, ("'dup'", "already in progress"), lambda: hvd.allreduce_async(torch.ones(1), name="dup")
        )
        hvd.barrier()
    else:
        hvd.barrier()
        first = hvd.allreduce_async(torch.ones(1), name="dup")
    hvd.synchronize(first)


@pytest.mark.parametrize("np_", NP)
def test_mismatches_raise_on_every_rank(np_: int) -> None:
    cluster(case_mismatches, np_)


def test_call_time_errors() -> None:
    cluster(case_call_time_errors, 2)


def test_uninitialized_use_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="not been initialized"):
        hvd.allreduce(torch.ones(1))


def case_cuda_tensor() -> str:
    hvd.init()
    return expect_error(ValueError, ("CUDA", "hvd-backend-nccl"), lambda: hvd.allreduce(torch.ones(2, device="cuda")))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: this check needs a real CUDA tensor")
def test_cuda_tensor_without_a_gpu_backend_names_the_package() -> None:
    cluster(case_cuda_tensor, 2)


def case_device_kind_reaches_the_engine() -> str:
    hvd.init()
    return expect_error(
        ValueError,
        ("CUDA", "no CUDA device can be used", "hvd-backend-nccl"),
        lambda: hvd.allreduce(torch.ones(2), name="cuda.fake"),
    )


def test_cuda_device_kind_gets_the_engines_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without a GPU, report a CPU tensor as CUDA: the engine must refuse it with its clear message.
    from horovod.torch import adapter

    assert adapter.device_kind(torch.device("cuda")) == DEVICE_CUDA
    assert adapter.device_kind(torch.device("cpu")) == DEVICE_CPU
    describe = adapter.TorchAdapter.describe
    monkeypatch.setattr(adapter.TorchAdapter, "describe", lambda self, t: (*describe(self, t)[:2], DEVICE_CUDA))
    # As a CUDA tensor does, it crosses through DLPack, from device 0's default stream.
    monkeypatch.setattr(adapter.TorchAdapter, "buffer", lambda self, t: t)
    monkeypatch.setattr(adapter.TorchAdapter, "placement", lambda self, t: (0, 0))
    cluster(case_device_kind_reaches_the_engine, 2)


# --- process sets -----------------------------------------------------------------------------------


def case_process_sets(n: int) -> None:
    evens, odds = hvd.ProcessSet(range(0, n, 2)), hvd.ProcessSet(range(1, n, 2))
    hvd.init(process_sets=[evens, odds])
    rank = hvd.rank()
    mine = evens if rank % 2 == 0 else odds
    result = hvd.allreduce(torch.full((2,), float(rank)), op=hvd.Sum, process_set=mine, name="ps.sum")
    assert result.tolist() == [float(sum(mine.ranks))] * 2
    assert hvd.allgather(torch.tensor([rank]), process_set=mine, name="ps.gather").tolist() == mine.ranks
    # root_rank is a global rank, as in Horovod: the set's last member here
    assert hvd.broadcast(torch.tensor([rank]), mine.ranks[-1], process_set=mine, name="ps.bc").tolist() == [
        mine.ranks[-1]
    ]
    # Gradients through a process set stay within it.
    x = torch.full((2,), float(rank), requires_grad=True)
    hvd.allgather(x.unsqueeze(0), process_set=mine, name="ps.ag.grad").sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]
    hvd.barrier(process_set=mine)
    hvd.barrier()


def case_dynamic_process_set() -> None:
    hvd.init(process_sets="dynamic")
    rank = hvd.rank()
    first_two = hvd.add_process_set([0, 1])
    if first_two.included():
        assert hvd.allreduce(torch.ones(2), op=hvd.Sum, process_set=first_two, name="dyn").tolist() == [2.0, 2.0]
    assert hvd.remove_process_set(first_two)
    hvd.barrier()
    assert rank >= 0


def test_static_process_sets() -> None:
    cluster(case_process_sets, 3, 3)


def test_dynamic_process_sets() -> None:
    cluster(case_dynamic_process_set, 3)
