"""Collective cases run on every rank by the conformance suite.

Each case is a module-level function (picklable, so a multi-process runner can ship it), starts
Horovod itself, computes the expected result locally from what every rank contributes (every rank
can recompute every other rank's input), and raises AssertionError on any difference.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import cast

import numpy as np

import horovod.common as hvd
from horovod.common import dtypes
from horovod.common.objects import broadcast_object

ALL_DTYPES = ("uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64", "bool")
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def np_dtype(name: str) -> np.dtype:
    return dtypes.from_name(name)


def contribution(rank: int, shape: tuple[int, ...], dtype: str, small: bool = False) -> np.ndarray:
    """Rank `rank`'s deterministic input: small integers, exact in every dtype."""
    count = int(np.prod(shape)) if shape else 1
    values = (np.arange(count) * 7 + rank * 3) % 5
    if small:  # for products: 1 or 2, so that four ranks cannot overflow int8
        values = values % 2 + 1
    if dtype == "bool":
        odd: np.ndarray = (values % 2 == 1).reshape(shape)  # (numpy types an array's `==` as Any)
        return odd
    return values.reshape(shape).astype(np_dtype(dtype))


def _assert_close(actual: np.ndarray, expected: np.ndarray, dtype: str, what: str) -> None:
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, expected {expected.shape}"
    assert actual.dtype == np_dtype(dtype), f"{what}: dtype {actual.dtype}, expected {dtype}"
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    tolerance = {"float16": 1e-2, "bfloat16": 2e-2}.get(dtype, 1e-6)
    assert np.allclose(a, e, rtol=tolerance, atol=tolerance), f"{what}: got {a.ravel()[:8]}, expected {e.ravel()[:8]}"


def reference(
    op: int, inputs: list[np.ndarray], dtype: str, prescale: float = 1.0, postscale: float = 1.0
) -> np.ndarray:
    """What the engine computes: scale each input, reduce, scale (Average divides by the count).
    Framework packages' tests compare their results with it, from numpy copies of their inputs."""
    n = len(inputs)
    if dtype == "bool":
        stacked = np.stack(inputs)
        # all/any along an axis of a stacked (>= 1-d) array give arrays; numpy types them as scalar-or-array
        return cast(np.ndarray, stacked.all(0) if op in (hvd.Min, hvd.Product) else stacked.any(0))
    wide = [x.astype(np.float64) * prescale for x in inputs]
    if np.issubdtype(np_dtype(dtype), np.integer):
        wide = [np.trunc(w) for w in wide]  # integer inputs are scaled and truncated per rank
    stacked = np.stack(wide)
    reduced: np.ndarray = {
        hvd.Sum: stacked.sum(0),
        hvd.Average: stacked.sum(0),
        hvd.Min: stacked.min(0),
        hvd.Max: stacked.max(0),
        hvd.Product: stacked.prod(0),
    }[op]
    factor = postscale / n if op == hvd.Average else postscale
    result = reduced * factor
    if np.issubdtype(np_dtype(dtype), np.integer):
        result = np.trunc(result)
    return result


def ops_for(dtype: str) -> list[int]:
    if dtype == "bool":
        return [hvd.Min, hvd.Max, hvd.Product]
    return [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]


def case_allreduce(dtype_names: tuple[str, ...]) -> None:
    hvd.init()
    n = hvd.size()
    shape = (3, 5)
    for dtype in dtype_names:
        for op in ops_for(dtype):
            small = op == hvd.Product
            inputs = [contribution(r, shape, dtype, small) for r in range(n)]
            result = hvd.allreduce(inputs[hvd.rank()], name=f"ar.{dtype}.{op}", op=op)
            _assert_close(result, reference(op, inputs, dtype), dtype, f"allreduce {dtype} op={op}")
        if dtype != "bool":
            inputs = [contribution(r, shape, dtype) for r in range(n)]
            result = hvd.allreduce(
                inputs[hvd.rank()], name=f"ar.scaled.{dtype}", op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5
            )
            _assert_close(result, reference(hvd.Sum, inputs, dtype, 2.0, 0.5), dtype, f"scaled allreduce {dtype}")
    # Scalars and empty tensors are legal.
    scalar = hvd.allreduce(np.float32(hvd.rank()), op=hvd.Sum, name="ar.scalar")
    assert scalar.shape == () and scalar == sum(range(n)), scalar
    empty = hvd.allreduce(np.zeros((0, 4), np.float32), op=hvd.Sum, name="ar.empty")
    assert empty.shape == (0, 4)


def case_allgather(dtype_names: tuple[str, ...]) -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    for dtype in dtype_names:
        # Rank r contributes r rows: the first dimension differs, and rank 0 sends nothing.
        inputs = [contribution(r, (r, 2, 3), dtype) for r in range(n)]
        result = hvd.allgather(inputs[rank], name=f"ag.{dtype}")
        _assert_close(result, np.concatenate(inputs), dtype, f"allgather {dtype}")


def case_broadcast(dtype_names: tuple[str, ...]) -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    for dtype in dtype_names:
        for root in range(n):
            # A name's second call is a cache hit, whose small data rides the negotiation: it must
            # deliver the root's new data, not the first call's.
            for call in (0, 1):
                mine = contribution(rank + call, (4, 3), dtype)
                result = hvd.broadcast(mine, root_rank=root, name=f"bc.{dtype}.{root}")
                what = f"broadcast {dtype} root={root}, call {call + 1}"
                _assert_close(result, contribution(root + call, (4, 3), dtype), dtype, what)
                assert np.array_equal(mine, contribution(rank + call, (4, 3), dtype)), "broadcast modified its input"


def case_alltoall(dtype_names: tuple[str, ...]) -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()

    def splits_of(r: int) -> list[int]:
        return [(r + i) % 3 for i in range(n)]

    for dtype in dtype_names:
        inputs = [contribution(r, (sum(splits_of(r)), 2), dtype) for r in range(n)]
        received, received_splits = hvd.alltoall(inputs[rank], splits=splits_of(rank), name=f"a2a.{dtype}")
        pieces = []
        for r in range(n):
            start = sum(splits_of(r)[:rank])
            pieces.append(inputs[r][start : start + splits_of(r)[rank]])
        _assert_close(received, np.concatenate(pieces), dtype, f"alltoall {dtype}")
        assert list(received_splits) == [splits_of(r)[rank] for r in range(n)], received_splits
        # Without splits: equal parts.
        even = [contribution(r, (2 * n, 3), dtype) for r in range(n)]
        received, received_splits = hvd.alltoall(even[rank], name=f"a2a.even.{dtype}")
        expected = np.concatenate([even[r][2 * rank : 2 * rank + 2] for r in range(n)])
        _assert_close(received, expected, dtype, f"alltoall even {dtype}")
        assert list(received_splits) == [2] * n


def case_cached_ops_sent_ahead() -> dict[str, object]:
    """Cached broadcasts and alltoalls too large for the negotiation's inline space, which a backend
    with eager messages sends ahead of negotiation: new data every call, every root, splits that
    change, a rank that comes late. Returns the engine's counters, for the backend's own checks."""
    from horovod.common.testing.probes import engine_stats

    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    elements = 64 * 1024  # float32: 256 KiB
    for call in range(3):
        if rank == n - 1 and call == 1:
            time.sleep(0.1)  # the others' data waits in this rank's space for several cycles
        for root in range(n):
            mine = np.arange(elements, dtype=np.float32) + 1000 * rank + call
            got = hvd.broadcast(mine, root_rank=root, name=f"ahead.bc.{root}")
            expected = np.arange(elements, dtype=np.float32) + 1000 * root + call
            assert np.array_equal(got, expected), f"broadcast root={root}, call {call + 1}"
        row = 16 * 1024  # float32 elements: 64 KiB rows
        splits = [[1 + (r + peer + call) % 2 for peer in range(n)] for r in range(n)]
        inputs = [np.arange(sum(splits[r]) * row, dtype=np.float32).reshape(-1, row) + 1e5 * r for r in range(n)]
        got, received = hvd.alltoall(inputs[rank], splits=splits[rank], name="ahead.a2a")
        pieces = [inputs[r][sum(splits[r][:rank]) : sum(splits[r][: rank + 1])] for r in range(n)]
        assert np.array_equal(got, np.concatenate(pieces)), f"alltoall call {call + 1}"
        assert list(received) == [splits[r][rank] for r in range(n)], received
    return engine_stats()


def case_reducescatter(dtype_names: tuple[str, ...]) -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    rows = 2 * n + 1  # uneven: the first rank gets one more row
    counts = [rows // n + (1 if r < rows % n else 0) for r in range(n)]
    start = sum(counts[:rank])
    for dtype in dtype_names:
        if dtype == "bool":
            continue
        for op in (hvd.Sum, hvd.Average):
            inputs = [contribution(r, (rows, 3), dtype) for r in range(n)]
            result = hvd.reducescatter(inputs[rank], name=f"rs.{dtype}.{op}", op=op)
            expected = reference(op, inputs, dtype)[start : start + counts[rank]]
            _assert_close(result, expected, dtype, f"reducescatter {dtype} op={op}")


def case_barrier_and_async() -> None:
    hvd.init()
    rank = hvd.rank()
    hvd.barrier()
    if hvd.size() > 1:
        # The op cannot complete before the last rank submits it: poll must say so, without blocking.
        if rank == 0:
            handle = hvd.allreduce_async(np.ones(2, np.float32), name="late", op=hvd.Sum)
            assert hvd.poll(handle) is False, "poll returned True before every rank had submitted"
            hvd.barrier()
        else:
            hvd.barrier()
            time.sleep(0.2)
            handle = hvd.allreduce_async(np.ones(2, np.float32), name="late", op=hvd.Sum)
        result = hvd.synchronize(handle)
        assert result.tolist() == [hvd.size()] * 2
    handles = [hvd.allreduce_async(np.full(3, i, np.float64), name=f"many.{i}", op=hvd.Sum) for i in range(20)]
    deadline = time.time() + 30
    while not all(hvd.poll(h) for h in handles):
        assert time.time() < deadline, "async allreduces did not complete"
        time.sleep(0.001)
    for i, h in enumerate(handles):
        assert hvd.synchronize(h).tolist() == [i * hvd.size()] * 3


def case_grouped() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    tensors = [
        contribution(rank, (3,), "float32"),
        contribution(rank, (2, 2), "int64"),
        contribution(rank, (5,), "float64"),
    ]
    results = hvd.grouped_allreduce(tensors, op=hvd.Sum, name="group.ar")
    for i, (result, dtype) in enumerate(zip(results, ("float32", "int64", "float64"), strict=True)):
        expected = sum(contribution(r, tensors[i].shape, dtype).astype(np.float64) for r in range(n))
        assert isinstance(expected, np.ndarray)  # (sum's start, 0, stays only for n == 0)
        _assert_close(result, expected, dtype, f"grouped allreduce #{i}")
    gathered = hvd.grouped_allgather([np.full((rank + 1, 2), rank, np.int32), np.full((1,), rank, np.float32)])
    assert gathered[0].shape == (n * (n + 1) // 2, 2) and gathered[1].tolist() == list(range(n))
    scattered = hvd.grouped_reducescatter([np.ones((n, 2), np.float32)] * 2, op=hvd.Sum)
    assert all(s.tolist() == [[n, n]] for s in scattered), scattered


def case_join() -> int:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    for step in range(rank + 1):  # rank r takes r + 1 steps, then joins
        active = [r for r in range(n) if r + 1 > step]
        total = hvd.allreduce(np.full(4, rank + 1, np.float32), name="join.step", op=hvd.Sum)
        assert total.tolist() == [float(sum(r + 1 for r in active))] * 4, (step, total)
        rows = hvd.allgather(np.full((1, 2), rank, np.int64), name="join.gather")
        assert rows[:, 0].tolist() == active, (step, rows)
        lowest = hvd.allreduce(np.full(2, rank + 10, np.int32), name="join.min", op=hvd.Min)
        assert lowest.tolist() == [min(active) + 10] * 2, (step, lowest)
    last = hvd.join()
    assert last == n - 1, f"join returned {last}, expected the rank with the most steps ({n - 1})"
    # After everyone joined, collectives work normally again.
    after = hvd.allreduce(np.ones(1, np.float32), name="join.after", op=hvd.Sum)
    assert after.tolist() == [n]
    return last


def case_join_contributions() -> None:
    """What a joined rank contributes until every rank has joined (hvd completes every collective
    then, where Horovod refuses all but allreduce; the README of hvd-torch lists the same)."""
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    if n < 2:
        return
    joined = n - 1  # joins at once; the others run every collective while it waits
    active = list(range(n - 1))
    if rank != joined:
        average = hvd.allreduce(np.full(2, rank + 1.0), op=hvd.Average, name="jc.average")
        assert average.tolist() == [sum(r + 1.0 for r in active) / n] * 2, average  # divided by every rank
        top = hvd.allreduce(np.full(2, -(rank + 1), np.int64), op=hvd.Max, name="jc.max")
        assert top.tolist() == [-1, -1], top  # the joined rank is left out (Horovod's zeros would give 0)
        product = hvd.allreduce(np.full(2, rank + 2.0), op=hvd.Product, name="jc.product")
        assert product.tolist() == [float(np.prod([r + 2.0 for r in active]))] * 2, product
        rows = hvd.allgather(np.full((rank + 1, 1), rank, np.int32), name="jc.gather")
        assert rows[:, 0].tolist() == [r for r in active for _ in range(r + 1)], rows
        root = hvd.broadcast(np.array([rank * 10.0]), root_rank=0, name="jc.bcast")
        assert root.tolist() == [0.0], root
        received, splits = hvd.alltoall(np.full((n, 1), rank, np.int32), name="jc.alltoall")
        assert received[:, 0].tolist() == active and splits.tolist() == [1] * (n - 1) + [0], (received, splits)
        mine = hvd.reducescatter(np.ones((n, 2), np.float32), op=hvd.Sum, name="jc.reducescatter")
        assert mine.tolist() == [[float(n - 1)] * 2], mine  # this rank's row, summed over the active ranks
        missing_root = expect_error(
            hvd.CollectiveMismatchError, (), lambda: hvd.broadcast(np.zeros(1), root_rank=joined, name="jc.orphan")
        )
        assert f"{joined}" in missing_root, missing_root
    last = hvd.join()
    everyone = hvd.allgather(np.array([last], np.int32), name="jc.last").tolist()
    assert everyone == [last] * n and last in active, everyone  # the last to join: one of the active ranks


def case_static_process_sets() -> None:
    n = _size_from_env()
    if n < 2:  # with one rank every subset is the global set, which cannot be registered twice
        hvd.init()
        return
    evens, odds = hvd.ProcessSet(range(0, n, 2)), hvd.ProcessSet(range(1, n, 2))
    hvd.init(process_sets=[evens, odds])
    rank = hvd.rank()
    mine, other = (evens, odds) if rank % 2 == 0 else (odds, evens)
    assert mine.included() and mine.rank() == mine.ranks.index(rank) and mine.size() == len(mine.ranks)
    result = hvd.allreduce(np.full(2, rank, np.float32), op=hvd.Sum, process_set=mine, name="ps.sum")
    assert result.tolist() == [float(sum(mine.ranks))] * 2, result
    gathered = hvd.allgather(np.array([rank]), process_set=mine, name="ps.gather")
    assert gathered.tolist() == mine.ranks
    if other.ranks:
        assert other.included() is False
        try:
            hvd.allreduce(np.ones(1), process_set=other, name="ps.foreign")
        except ValueError as error:
            assert f"rank {rank} is not a member of process set {other.process_set_id}" in str(error), error
        else:
            raise AssertionError("an op on a process set excluding this rank was accepted")
    hvd.barrier()


def case_process_set_broadcast_roots() -> None:
    """Broadcasts on process sets take a global root_rank, as in Horovod (the sets [0], [1], and with
    3 ranks [0, 2] and [1, 2], each member root in turn, also for broadcast_object); a root outside
    the set is refused on every member, naming the set's ranks."""
    n = _size_from_env()
    if n < 2:
        hvd.init()
        return
    ranks_of_sets = [[0], [1], [0, 2], [1, 2]] if n >= 3 else [[0], [1]]
    sets = [hvd.ProcessSet(ranks) for ranks in ranks_of_sets]
    hvd.init(process_sets=sets)
    rank = hvd.rank()
    for ps in sets:
        if not ps.included():
            continue
        for root in ps.ranks:
            name = f"psbc.{ps.process_set_id}.{root}"
            result = hvd.broadcast(np.full(3, rank, np.int32), root_rank=root, process_set=ps, name=name)
            assert result.tolist() == [root] * 3, (ps.ranks, root, result)
            # Named: unnamed calls are numbered per rank, and each rank here joins different sets.
            got = broadcast_object(("from", rank), root_rank=root, name=f"{name}.object", process_set=ps)
            assert got == ("from", root), (ps.ranks, root, got)
        outsider = next(r for r in range(n) if r not in ps.ranks)
        try:
            hvd.broadcast(np.ones(1), root_rank=outsider, process_set=ps, name=f"psbc.{ps.process_set_id}.outside")
        except ValueError as error:
            expected = f"root rank {outsider} is not a member of process set {ps.process_set_id} (ranks {ps.ranks})"
            assert expected in str(error), error
        else:
            raise AssertionError(f"root {outsider} outside {ps.ranks} was accepted")
    hvd.barrier()


def case_dynamic_process_sets() -> None:
    hvd.init(process_sets="dynamic")
    n = hvd.size()
    if n < 2:  # with one rank every subset is the global set
        return
    subset = [0, 1] if n > 2 else [0]  # a proper subset: the global set cannot be added again
    first_two = hvd.add_process_set(subset)
    first_id = first_two.process_set_id  # (a local: mypy would keep the attribute narrowed past removal)
    assert first_id is not None and first_id > 0
    if first_two.included():
        result = hvd.allreduce(np.ones(2, np.float32), op=hvd.Sum, process_set=first_two, name="dyn.sum")
        assert result.tolist() == [float(len(first_two.ranks))] * 2
    everyone_else = hvd.add_process_set(list(range(1, n))) if n > 2 else None
    if everyone_else is not None:
        try:
            hvd.add_process_set(list(range(1, n)))
        except ValueError as error:
            assert "already exists" in str(error), error
        else:
            raise AssertionError("the same process set was added twice")
    if everyone_else is not None and everyone_else.included():
        result = hvd.allreduce(np.ones(1, np.float32), op=hvd.Sum, process_set=everyone_else, name="dyn.rest")
        assert result.tolist() == [float(n - 1)]
    assert hvd.remove_process_set(first_two) is True
    assert first_two.process_set_id is None
    try:
        hvd.allreduce(np.ones(1), process_set=first_two, name="dyn.removed")
    except ValueError as error:
        assert "not registered" in str(error), error
    else:
        raise AssertionError("an op on a removed process set was accepted")
    again = hvd.add_process_set(subset)  # the same ranks can be registered again after removal
    if again.included():
        result = hvd.allreduce(np.ones(1), op=hvd.Sum, process_set=again, name="dyn.again")
        assert result.tolist() == [float(len(subset))], result
    hvd.barrier()


def _size_from_env() -> int:
    from horovod.common.testing.probes import job_topology

    return job_topology().size


def expect_error(kind: type[BaseException], fragments: tuple[str, ...], call: Callable[[], object]) -> str:
    """Runs `call`, which must raise `kind` with every fragment in its message; returns the message."""
    try:
        call()
    except kind as error:
        message = str(error)
        for fragment in fragments:
            assert fragment in message, f"{fragment!r} not in error: {message}"
        return message
    raise AssertionError(f"expected {kind.__name__} containing {fragments}")


def case_mismatches() -> None:
    """Disagreements raise on every rank, naming the tensor and the disagreeing ranks."""
    hvd.init()
    rank, n = hvd.rank(), hvd.size()
    if n < 2:
        return
    last = n - 1
    odd = rank == last  # the last rank disagrees with everybody else
    mismatch = hvd.CollectiveMismatchError
    expect_error(
        mismatch,
        ("'mm.shape'", "shapes", f"rank {last} has [3]"),
        lambda: hvd.allreduce(np.ones(3 if odd else 2, np.float32), name="mm.shape"),
    )
    expect_error(
        mismatch,
        ("'mm.dtype'", "data types", f"rank {last} has float64"),
        lambda: hvd.allreduce(np.ones(2, np.float64 if odd else np.float32), name="mm.dtype"),
    )
    expect_error(
        mismatch,
        ("'mm.op'", "reduce ops", f"rank {last} has Max"),
        lambda: hvd.allreduce(np.ones(2), name="mm.op", op=hvd.Max if odd else hvd.Sum),
    )
    expect_error(
        mismatch,
        ("'mm.root'", "root ranks"),
        lambda: hvd.broadcast(np.ones(2), root_rank=1 if odd else 0, name="mm.root"),
    )
    expect_error(
        mismatch,
        ("'mm.scale'", "prescale factors", f"rank {last} has 3"),
        lambda: hvd.allreduce(np.ones(2), name="mm.scale", prescale_factor=3.0 if odd else 1.0),
    )
    expect_error(
        mismatch,
        ("'mm.kind'", "collective operations"),
        lambda: (hvd.allgather if odd else hvd.allreduce)(np.ones(2), name="mm.kind"),
    )
    expect_error(
        mismatch,
        ("'mm.gather'", "all dimensions but the first"),
        lambda: hvd.allgather(np.ones((1, 3 if odd else 2)), name="mm.gather"),
    )
    # The engine is still healthy afterwards.
    assert hvd.allreduce(np.ones(1), op=hvd.Sum, name="mm.after").tolist() == [float(n)]


def case_call_time_errors() -> None:
    """Misuse one rank can see by itself raises ValueError at once, naming what is wrong."""
    hvd.init()
    n = hvd.size()
    expect_error(ValueError, ("root rank", "out of range"), lambda: hvd.broadcast(np.ones(2), root_rank=n))
    expect_error(ValueError, ("splits sum to",), lambda: hvd.alltoall(np.ones(4), splits=[5] + [0] * (n - 1)))
    expect_error(ValueError, ("one per rank",), lambda: hvd.alltoall(np.ones(4), splits=[1] * (n + 1)))
    # A float split would be truncated, moving other rows than asked: refused, whatever holds it.
    floats = [4.0] + [0.0] * (n - 1)
    expect_error(ValueError, ("splits must be integers", "4.0"), lambda: hvd.alltoall(np.ones(4), splits=floats))
    expect_error(ValueError, ("splits must be integers",), lambda: hvd.alltoall(np.ones(4), splits=np.array(floats)))
    expect_error(ValueError, ("bool",), lambda: hvd.allreduce(np.ones(2, bool), op=hvd.Sum))
    expect_error(ValueError, ("Adasum", "int32"), lambda: hvd.allreduce(np.ones(2, np.int32), op=hvd.Adasum))
    expect_error(ValueError, ("at least one dimension",), lambda: hvd.allgather(np.float32(1)))
    expect_error(ValueError, ("complex128", "not supported"), lambda: hvd.allreduce(np.ones(2, np.complex128)))
    expect_error(ValueError, ("reducescatter supports",), lambda: hvd.reducescatter(np.ones((n, 1)), op=hvd.Max))
    # A name still in flight cannot be reused. Rank 0's op cannot complete before the others
    # submit it, which they do only after the barrier that rank 0 enters after the check.
    if n > 1:
        if hvd.rank() == 0:
            first = hvd.allreduce_async(np.ones(1), name="dup")
            expect_error(
                ValueError, ("'dup'", "already in progress"), lambda: hvd.allreduce_async(np.ones(1), name="dup")
            )
            hvd.barrier()
            hvd.synchronize(first)
        else:
            hvd.barrier()
            hvd.allreduce(np.ones(1), name="dup")
        hvd.allreduce(np.ones(1), name="dup")  # free again once completed


def case_fusion_results(names: int) -> list[list[float]]:
    """Many small allreduces at once; returned for comparison between fusion on and off."""
    hvd.init()
    rank = hvd.rank()
    handles = [
        hvd.allreduce_async(contribution(rank + i, (i % 7 + 1,), "float32"), name=f"fuse.{i}", op=hvd.Average)
        for i in range(names)
    ]
    return [hvd.synchronize(h).tolist() for h in handles]
