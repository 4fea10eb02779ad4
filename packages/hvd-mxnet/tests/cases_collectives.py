"""Cases run on every rank (horovod.run) by test_collectives.py: each checks against local references.

The collectives that run in MXNet's engine are pushed many at a time and read afterwards, as
training code uses them: nothing here waits between pushes unless the case says why.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np

from mx_testutil import (
    ALL_DTYPES,
    NUMERIC_DTYPES,
    assert_close,
    contribution,
    import_mxnet,
    nd,
    ops_for,
    pointer,
    reference,
)

mx = import_mxnet()
import horovod.mxnet as hvd  # noqa: E402  (after MXNet's import, whose warnings are silenced)
from horovod.common.testing.cases import expect_error  # noqa: E402


def _init() -> tuple[int, int]:
    hvd.init()
    return hvd.size(), hvd.rank()


def case_allreduce() -> None:
    n, rank = _init()
    checks: list[tuple[Any, np.ndarray, str, str]] = []
    for dtype in ALL_DTYPES:
        for op in ops_for(dtype):
            inputs = [contribution(r, (3, 5), dtype, small=op == hvd.Product) for r in range(n)]
            mine = nd(inputs[rank])
            checks.append(
                (
                    hvd.allreduce(mine, op=op, name=f"ar.{dtype}.{op}"),
                    reference(op, inputs, dtype),
                    dtype,
                    f"allreduce {dtype} op={op}",
                )
            )
            checks.append((mine, inputs[rank], dtype, "allreduce left its input alone"))
            inplace = nd(inputs[rank])
            before = pointer(inplace)
            assert hvd.allreduce_(inplace, op=op, name=f"ar_.{dtype}.{op}") is inplace
            checks.append((inplace, reference(op, inputs, dtype), dtype, f"allreduce_ {dtype} op={op}"))
            assert pointer(inplace) == before, "allreduce_ moved the array's memory"
        if dtype != "bool":
            inputs = [contribution(r, (4,), dtype) for r in range(n)]
            for op in (hvd.Sum, hvd.Average):
                result = hvd.allreduce(
                    nd(inputs[rank]), op=op, prescale_factor=2.0, postscale_factor=0.5, name=f"ar.scaled.{dtype}.{op}"
                )
                checks.append(
                    (result, reference(op, inputs, dtype, 2.0, 0.5), dtype, f"scaled allreduce {dtype} op={op}")
                )
    for actual, expected, dtype, what in checks:  # read only now: every collective was in flight at once
        assert_close(actual, expected, dtype, what)
    # Default op is Average; scalars and empty arrays are legal; average= is Horovod's deprecated form.
    assert hvd.allreduce(mx.nd.array([float(rank)]), name="ar.default").asscalar() == (n - 1) / 2
    assert hvd.allreduce(mx.nd.array(np.zeros((0, 4), np.float32)), op=hvd.Sum, name="ar.empty").shape == (0, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        total = hvd.allreduce(mx.nd.ones(2), average=False, name="ar.average_false")
    assert total.asnumpy().tolist() == [float(n)] * 2
    assert any(issubclass(w.category, DeprecationWarning) and "average" in str(w.message) for w in caught)
    # Adasum combines floating-point tensors only: refused, naming it, where the result is read.
    expect_error(
        Exception, ("Adasum", "int32"), lambda: hvd.allreduce(mx.nd.ones(2, dtype="int32"), op=hvd.Adasum).asnumpy()
    )


def case_grouped() -> None:
    n, rank = _init()
    dtypes = ("float32", "int64", "float64", "uint8", "float16")
    inputs = [[contribution(r, (i + 2, 3), d) for r in range(n)] for i, d in enumerate(dtypes)]
    arrays = [nd(per_rank[rank]) for per_rank in inputs]
    results = hvd.grouped_allreduce(arrays, op=hvd.Sum, name="g.ar")
    assert isinstance(results, list) and len(results) == len(dtypes)
    in_place = [nd(per_rank[rank]) for per_rank in inputs]
    pointers = [pointer(a) for a in in_place]
    returned = hvd.grouped_allreduce_(in_place, op=hvd.Max, name="g.ar_")
    assert all(r is a for r, a in zip(returned, in_place, strict=True))
    for i, dtype in enumerate(dtypes):
        assert_close(results[i], reference(hvd.Sum, inputs[i], dtype), dtype, f"grouped_allreduce #{i}")
        assert_close(in_place[i], reference(hvd.Max, inputs[i], dtype), dtype, f"grouped_allreduce_ #{i}")
    assert [pointer(a) for a in in_place] == pointers
    assert hvd.grouped_allreduce([]) == [] and hvd.grouped_allreduce_([]) == []
    averaged = hvd.grouped_allreduce([mx.nd.ones(2) * rank], prescale_factor=2.0, name="g.avg")
    assert averaged[0].asnumpy().tolist() == [2.0 * (n - 1) / 2] * 2

    gathered = hvd.grouped_allgather([mx.nd.ones((rank + 1, 2), dtype="int32") * rank, mx.nd.array([float(rank)])])
    assert gathered[0].shape == (n * (n + 1) // 2, 2) and gathered[1].asnumpy().tolist() == [float(r) for r in range(n)]
    scattered = hvd.grouped_reducescatter([mx.nd.ones((n, 2)), mx.nd.ones((n,), dtype="int64")], op=hvd.Sum)
    assert scattered[0].asnumpy().tolist() == [[float(n)] * 2] and scattered[1].asnumpy().tolist() == [n]


def case_adasum() -> None:
    """op=hvd.Adasum on NDArrays (allreduce, allreduce_, grouped_allreduce) against hvd-core's
    numpy reference."""
    from horovod.common.testing.adasum import assert_close as assert_adasum
    from horovod.common.testing.adasum import expected

    n, rank = _init()
    per_rank = {
        d: [np.random.default_rng(10 * r + i).standard_normal(257).astype(d) for r in range(n)]
        for i, d in enumerate(("float32", "float64", "float16"))
    }
    for dtype, inputs in per_rank.items():
        got = hvd.allreduce(nd(inputs[rank]), op=hvd.Adasum, name=f"ada.{dtype}")
        assert_adasum(got.asnumpy(), expected(inputs), dtype, f"allreduce {dtype}")
        in_place = nd(inputs[rank])
        hvd.allreduce_(in_place, op=hvd.Adasum, name=f"ada_.{dtype}")
        assert_adasum(in_place.asnumpy(), expected(inputs), dtype, f"allreduce_ {dtype}")
    group = hvd.grouped_allreduce([nd(x[rank]) for x in per_rank.values()], op=hvd.Adasum, name="ada.group")
    for (dtype, inputs), got in zip(per_rank.items(), group, strict=True):
        assert_adasum(got.asnumpy(), expected(inputs), dtype, f"grouped_allreduce {dtype}")


def case_broadcast() -> None:
    n, rank = _init()
    checks = []
    for dtype in ALL_DTYPES:
        for root in sorted({0, n - 1}):
            inputs = [contribution(r, (2, 3), dtype) for r in range(n)]
            mine = nd(inputs[rank])
            checks.append(
                (
                    hvd.broadcast(mine, root_rank=root, name=f"bc.{dtype}.{root}"),
                    inputs[root],
                    dtype,
                    f"broadcast {dtype} root {root}",
                )
            )
            checks.append((mine, inputs[rank], dtype, "broadcast left its input alone"))
            target = nd(inputs[rank])
            before = pointer(target)
            assert hvd.broadcast_(target, root, name=f"bc_.{dtype}.{root}") is target
            checks.append((target, inputs[root], dtype, f"broadcast_ {dtype} root {root}"))
            assert pointer(target) == before
    for actual, expected, dtype, what in checks:
        assert_close(actual, expected.astype(np.float64), dtype, what)
    expect_error(ValueError, ("rank",), lambda: hvd.broadcast(mx.nd.ones(1), root_rank=n, name="bc.bad_root"))


def case_allgather_alltoall() -> None:
    n, rank = _init()
    for dtype in ALL_DTYPES:
        inputs = [contribution(r, (r + 1, 2), dtype) for r in range(n)]
        result = hvd.allgather(nd(inputs[rank]), name=f"ag.{dtype}")
        assert_close(result, np.concatenate(inputs).astype(np.float64), dtype, f"allgather {dtype}")
        # alltoall: rank r sends (d + 1) rows to rank d, rows valued 10 * r + d.
        rows = [np.concatenate([np.full((d + 1, 2), 10 * r + d) for d in range(n)]).astype(dtype) for r in range(n)]
        splits = [d + 1 for d in range(n)]
        received, received_splits = hvd.alltoall(nd(rows[rank]), splits=splits, name=f"a2a.{dtype}")
        expected = np.concatenate([np.full((rank + 1, 2), 10 * r + rank) for r in range(n)]).astype(dtype)
        assert_close(received, expected.astype(np.float64), dtype, f"alltoall {dtype}")
        assert isinstance(received_splits, mx.nd.NDArray) and received_splits.dtype == np.int32
        assert received_splits.asnumpy().tolist() == [rank + 1] * n
    # Without splits the rows are split equally, and only the received array is returned.
    even = hvd.alltoall(mx.nd.array(np.arange(n, dtype=np.float32) + 100 * rank), name="a2a.even")
    assert even.asnumpy().tolist() == [100.0 * r + rank for r in range(n)]
    # splits as an NDArray (as Horovod's MXNet API takes them)
    out, got = hvd.alltoall(mx.nd.ones((n, 1)), splits=mx.nd.array([1] * n, dtype="int32"), name="a2a.nd_splits")
    assert out.shape == (n, 1) and got.asnumpy().tolist() == [1] * n
    # A rank with no rows, and a result that outlives everything else (it shares the engine's buffer).
    part = hvd.allgather(mx.nd.array(np.zeros((0 if rank == 0 else 2, 3), np.float32)), name="ag.empty_part")
    assert part.shape == (2 * (n - 1), 3)


def case_reducescatter() -> None:
    n, rank = _init()
    checks = []
    for dtype in NUMERIC_DTYPES:
        for op in (hvd.Sum, hvd.Average):
            rows = 2 * n + 1  # uneven: the first rank gets one row more
            inputs = [contribution(r, (rows, 3), dtype) for r in range(n)]
            full = reference(op, inputs, dtype, 2.0 if dtype.startswith("float") else 1.0)
            start = sum(rows // n + (1 if r < rows % n else 0) for r in range(rank))
            mine = rows // n + (1 if rank < rows % n else 0)
            scale = 2.0 if dtype.startswith("float") else 1.0
            result = hvd.reducescatter(nd(inputs[rank]), op=op, name=f"rs.{dtype}.{op}", prescale_factor=scale)
            checks.append((result, full[start : start + mine], dtype, f"reducescatter {dtype} op={op}"))
    for actual, expected, dtype, what in checks:
        assert_close(actual, expected, dtype, what)
    expect_error(
        hvd.UnsupportedOperationError, ("reducescatter",), lambda: hvd.reducescatter(mx.nd.ones((n,)), op=hvd.Max)
    )


def case_engine_order() -> None:
    """MXNet's engine orders collectives with the operations around them, without explicit waits."""
    n, rank = _init()
    total = float(sum(range(1, n + 1)))
    # The input is produced by a pending (slow) operation: the collective waits for it.
    a = mx.nd.ones((300, 300)) * (rank + 1)
    b = mx.nd.ones((300, 300)) / 300.0
    product = mx.nd.dot(a, b)  # every element rank + 1, computed later by MXNet's workers
    reduced = hvd.allreduce(product, op=hvd.Sum, name="eng.pending_input")
    after = reduced * 2 + 1  # an MXNet operation reading the collective's output
    assert np.allclose(after.asnumpy(), 2 * total + 1)
    # A write pushed after the collective waits for it to have read its input (write after read).
    x = mx.nd.ones(4) * (rank + 1)
    y = hvd.allreduce(x, op=hvd.Sum, name="eng.war")
    x[:] = 100
    assert y.asnumpy().tolist() == [total] * 4 and x.asnumpy().tolist() == [100.0] * 4
    # In-place collectives chain on one array, with MXNet operations between them.
    z = mx.nd.ones(3)
    for step in range(3):
        hvd.allreduce_(z, op=hvd.Sum, name=f"eng.chain.{step}")
        z += 1
    expected = 1.0
    for _ in range(3):
        expected = expected * n + 1
    assert z.asnumpy().tolist() == [expected] * 3
    # Views: an axis-0 slice shares its parent's memory; in place writes the parent's rows.
    parent = mx.nd.zeros((4, 2)) + rank
    view = parent[1:3]
    hvd.allreduce_(view, op=hvd.Sum, name="eng.view")
    expected_parent = np.full((4, 2), float(rank))
    expected_parent[1:3] = float(sum(range(n)))
    assert parent.asnumpy().tolist() == expected_parent.tolist()
    # mx.nd.waitall() waits for collectives too.
    many = [hvd.allreduce(mx.nd.ones(5) * i, op=hvd.Sum, name=f"eng.many.{i}") for i in range(50)]
    mx.nd.waitall()
    assert all(m.asnumpy().tolist() == [float(n * i)] * 5 for i, m in enumerate(many))


def case_process_sets() -> None:
    n, rank = _init()
    members = [0, n - 1] if n > 2 else [1]  # never every rank: that set exists already (the global one)
    root = members[-1]
    subset = hvd.add_process_set(members)
    try:
        x = mx.nd.ones(3) * (rank + 1)
        if rank in members:
            y = hvd.allreduce(x, op=hvd.Sum, name="ps.ar", process_set=subset)
            assert y.asnumpy().tolist() == [float(sum(m + 1 for m in members))] * 3
            b = hvd.broadcast(x, root_rank=root, name="ps.bc", process_set=subset)
            assert b.asnumpy().tolist() == [float(root + 1)] * 3
            g = hvd.allgather(mx.nd.array([float(rank)]), name="ps.ag", process_set=subset)
            assert g.asnumpy().tolist() == [float(m) for m in members]
            count = len(members)
            rs = hvd.reducescatter(mx.nd.ones((2, 2)), op=hvd.Sum, name="ps.rs", process_set=subset)
            assert rs.asnumpy().tolist() == [[float(count)] * 2] * (2 // count)
            hvd.barrier(process_set=subset)
        else:
            expect_error(ValueError, ("not a member",), lambda: hvd.allreduce(x, name="ps.ar", process_set=subset))
        # The global set still works beside it.
        assert hvd.allreduce(x, op=hvd.Sum, name="ps.global").asnumpy().tolist() == [float(n * (n + 1) // 2)] * 3
    finally:
        hvd.remove_process_set(subset)


def case_mismatches() -> None:
    """Ranks disagreeing: MXNetError on every rank at the read (or at the call for allgather),
    naming the tensor and what differs; the next collectives work."""
    n, rank = _init()
    odd = rank == n - 1
    shape = hvd.allreduce(mx.nd.ones(4 if odd else 3), name="mm.shape")
    message = expect_error(mx.base.MXNetError, ("'mm.shape'", "shape", f"rank {n - 1} has [4]"), shape.asnumpy)
    assert "CollectiveMismatchError" in message
    dtype = hvd.allreduce_(mx.nd.ones(3, dtype="int32" if odd else "float32"), name="mm.dtype")
    expect_error(mx.base.MXNetError, ("'mm.dtype'", "int32", "float32"), dtype.wait_to_read)
    grouped = hvd.grouped_allreduce([mx.nd.ones(2), mx.nd.ones(5 if odd else 6)], name="mm.grouped")
    expect_error(mx.base.MXNetError, ("mm.grouped",), mx.nd.waitall)
    del grouped
    bcast = hvd.broadcast(mx.nd.ones((2, 2) if odd else (2, 3)), root_rank=0, name="mm.bcast")
    expect_error(mx.base.MXNetError, ("'mm.bcast'",), bcast.asnumpy)
    # allgather raises at the call: an error that is both hvd's and MXNet's.
    try:
        hvd.allgather(mx.nd.ones((1, 3 if odd else 2)), name="mm.allgather")
    except hvd.CollectiveMismatchError as error:
        assert isinstance(error, mx.base.MXNetError) and "mm.allgather" in str(error), error
    else:
        raise AssertionError("allgather with mismatched shapes did not raise")
    # Local refusals, before anything is submitted.
    expect_error(TypeError, ("NDArray",), lambda: hvd.allreduce(np.ones(3)))
    sparse = mx.nd.sparse.zeros("row_sparse", (2, 2))
    expect_error(ValueError, ("row_sparse", "tostype"), lambda: hvd.allreduce(sparse))
    from horovod.mxnet.adapter import dtype_code

    expect_error(ValueError, ("int16", "float32", "bool"), lambda: dtype_code(np.int16))
    # Still working afterwards.
    assert hvd.allreduce(mx.nd.ones(2), op=hvd.Sum, name="mm.after").asnumpy().tolist() == [float(n)] * 2


def case_join() -> int:
    _, rank = _init()
    if rank == 0:  # rank 0 has one batch more: the others contribute nothing while it reduces it
        extra = hvd.allreduce(mx.nd.ones(3) * 5, op=hvd.Sum, name="join.extra")
        assert extra.asnumpy().tolist() == [5.0] * 3
    return hvd.join()


def case_basics_and_objects() -> None:
    n, rank = _init()
    assert hvd.is_initialized() and 0 <= hvd.local_rank() < hvd.local_size() and hvd.cross_size() >= 1
    assert 0 <= hvd.cross_rank() < hvd.cross_size() and isinstance(hvd.is_homogeneous(), bool)
    assert hvd.gloo_enabled() and hvd.gloo_built()
    for query in (
        hvd.mpi_built,
        hvd.mpi_enabled,
        hvd.mpi_threads_supported,
        hvd.nccl_built,
        hvd.ddl_built,
        hvd.ccl_built,
        hvd.cuda_built,
        hvd.rocm_built,
    ):
        query()
    assert hvd.broadcast_object({"rank": rank}, root_rank=0) == {"rank": 0}
    assert hvd.allgather_object(rank * 2) == [r * 2 for r in range(n)]
    hvd.barrier()
    assert hvd.global_process_set.size() == n
    assert isinstance(hvd.HorovodInternalError("x"), RuntimeError)


def case_benchmark() -> dict[str, float]:
    """Per-operation cost (not asserted: reported by the test): 100 small in-place allreduces."""
    _init()
    arrays = [mx.nd.ones(16) for _ in range(100)]
    mx.nd.waitall()
    timings: dict[str, list[float]] = {"allreduce_ x100": [], "grouped_allreduce_ of 100": []}
    for _ in range(6):
        start = time.perf_counter()
        for i, a in enumerate(arrays):
            hvd.allreduce_(a, name=f"bench.{i}")
        mx.nd.waitall()
        timings["allreduce_ x100"].append(time.perf_counter() - start)
        start = time.perf_counter()
        hvd.grouped_allreduce_(arrays, name="bench.grouped")
        mx.nd.waitall()
        timings["grouped_allreduce_ of 100"].append(time.perf_counter() - start)
    return {key: float(np.median(values[1:])) * 1e3 for key, values in timings.items()}  # ms, first run dropped


def case_lost_peer() -> None:
    """A rank that stops submitting: the stall shutdown fails the others' pending collectives,
    which raise MXNetError (naming HorovodInternalError) at the read, on every rank."""
    _, rank = _init()
    pending = hvd.allreduce(mx.nd.ones(2), name=f"lost.only_on_{rank}")  # never matched by a peer
    message = expect_error(mx.base.MXNetError, (), pending.asnumpy)
    assert "HorovodInternalError" in message or "stall" in message.lower(), message
