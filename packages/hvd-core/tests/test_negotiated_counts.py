"""Allgather and alltoall sizes come with negotiation: no round of the executor's own.

The coordinator puts every member's first dimension (allgather) or splits (alltoall) into the
response, and the response cache keeps them: a member whose sizes changed sends its new ones with its
cache bit, or, when they do not fit the record's inline area, has the tensor negotiated again. A
member whose data fits too sends it after them, and when every member did, the op completes inside
negotiation. These tests check that the results are right whichever way the sizes and the data
travel, and which way they took.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import horovod.common as hvd
from horovod.common import state
from horovod.common.testing import run_cluster


def _stats() -> dict:
    return state.context().engine.stats()


def _rows(rank: int, step: int) -> int:
    # Rank 0 keeps its first dimension; the others change theirs every other step, rank 1 to 0 once.
    return 2 if rank == 0 else (rank + step // 2) % 3 + (rank - 1)


def _gather_steps(steps: int) -> list[dict]:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    seen = []
    for step in range(steps):
        inputs = [np.full((_rows(r, step), 3), 10 * r + step, np.int32) for r in range(n)]
        result = hvd.allgather(inputs[rank], name="g")
        assert np.array_equal(result, np.concatenate(inputs)), (step, result)
        seen.append(_stats())
    return seen


def _splits(rank: int, step: int, n: int) -> list[int]:
    return [(rank + i + step // 2) % 3 for i in range(n)]


def _alltoall_steps(steps: int) -> list[dict]:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    seen = []
    for step in range(steps):
        inputs = [np.arange(sum(_splits(r, step, n)) * 2, dtype=np.float64).reshape(-1, 2) + 100 * r for r in range(n)]
        received, received_splits = hvd.alltoall(inputs[rank], splits=_splits(rank, step, n), name="a")
        pieces = []
        for r in range(n):
            start = sum(_splits(r, step, n)[:rank])
            pieces.append(inputs[r][start : start + _splits(r, step, n)[rank]])
        assert np.array_equal(received, np.concatenate(pieces)), (step, received)
        assert list(received_splits) == [_splits(r, step, n)[rank] for r in range(n)], received_splits
        # Even splits, from a first dimension that changes too.
        even = np.full((n * (1 + step % 2), 2), rank, np.int64)
        received, received_splits = hvd.alltoall(even, name="a.even")
        assert received[:, 0].tolist() == [r for r in range(n) for _ in range(1 + step % 2)], (step, received)
        assert list(received_splits) == [1 + step % 2] * n
        seen.append(_stats())
    return seen


def test_changed_allgather_sizes_travel_with_the_cache_bits() -> None:
    for per_step in run_cluster(_gather_steps, 3, args=(8,)):
        # Only the first step goes through the coordinator: later sizes come with the cache bits.
        assert per_step[-1]["coordinator_rounds"] == per_step[0]["coordinator_rounds"], per_step
        assert per_step[-1]["cache_hits"] - per_step[0]["cache_hits"] == 7, per_step
        # The first call moves its data over the backend; the data of the later ones (48 bytes at
        # most) comes with the bits too.
        assert per_step[-1]["backend_calls"]["allgather"] == 1, per_step
        assert per_step[-1]["inline_allgathers"] == 7, per_step


def test_changed_alltoall_splits_travel_with_the_cache_bits() -> None:
    for per_step in run_cluster(_alltoall_steps, 3, args=(6,)):
        assert per_step[-1]["coordinator_rounds"] == per_step[0]["coordinator_rounds"], per_step
        assert per_step[-1]["cache_hits"] - per_step[0]["cache_hits"] == 10, per_step
        assert per_step[-1]["backend_calls"]["alltoall"] == 2, per_step
        assert per_step[-1]["inline_alltoalls"] == 10, per_step


def test_gathered_data_too_large_for_the_records_moves_over_the_backend() -> None:
    # 32 KiB per member with three members: over a record's share of the 64 KiB bound, so these
    # never ride inline.
    def case() -> list:
        hvd.init()
        n, rank = hvd.size(), hvd.rank()
        for step in range(4):
            rows = 4096 + step  # 8 bytes a row
            got = hvd.allgather(np.full((rows, 2), rank * 10 + step, np.int32), name="g")
            assert got[:, 0].tolist() == [r * 10 + step for r in range(n) for _ in range(rows)], step
            received, _ = hvd.alltoall(np.full((n * rows, 2), rank, np.int32), name="a")
            assert received[:, 0].tolist() == [r for r in range(n) for _ in range(rows)], step
        s = _stats()
        return [
            s["backend_calls"]["allgather"],
            s["backend_calls"]["alltoall"],
            s["inline_allgathers"],
            s["inline_alltoalls"],
        ]

    # Eager messages off: the alltoall's later calls would go ahead of negotiation (test_eager.py).
    env = {"HOROVOD_NEGOTIATION_INLINE_MAX_BYTES": str(64 * 1024), "HOROVOD_NEGOTIATION_EAGER_BYTES": "0"}
    assert run_cluster(case, 3, env=env) == [[4, 4, 0, 0]] * 3


def test_changed_sizes_that_do_not_fit_are_negotiated_again() -> None:
    # No inline area: a member whose sizes changed misses the cache, which drops the entry on every
    # member (also those whose sizes did not change), and the coordinator answers with fresh sizes.
    env = {"HOROVOD_NEGOTIATION_INLINE_BYTES": "0"}
    for per_step in run_cluster(_gather_steps, 3, args=(8,), env=env):
        rounds = [s["coordinator_rounds"] for s in per_step]
        # Sizes change at steps 2, 4 and 6 (rank 0's never do): those steps renegotiate (in two rounds:
        # one drops the entry everywhere, the next brings rank 0's request), the others hit. Counted
        # over all steps: each rank reads its counters when its own step is done, and a rank that
        # finished first may already be in the next step's first round (negotiation records do not
        # hold the ranks in step: negotiation/eager.h).
        assert rounds[-1] - rounds[0] == 3 * 2, rounds
        assert per_step[-1]["cache_hits"] - per_step[0]["cache_hits"] == 4, per_step
    for per_step in run_cluster(_alltoall_steps, 3, args=(4,), env=env):
        hits = [s["cache_hits"] for s in per_step]
        assert hits[1] - hits[0] == 1 and hits[3] - hits[2] == 1, hits  # "a" unchanged; "a.even" grew


def test_an_inline_area_too_small_for_the_splits_renegotiates_only_those() -> None:
    # 16 bytes, and no growth: an allgather's first dimension (8) fits, three members' splits (24) do not.
    env = {"HOROVOD_NEGOTIATION_INLINE_BYTES": "16", "HOROVOD_NEGOTIATION_INLINE_MAX_BYTES": "0"}
    for per_step in run_cluster(_gather_steps, 3, args=(6,), env=env):
        assert per_step[-1]["coordinator_rounds"] == per_step[0]["coordinator_rounds"], per_step
    for per_step in run_cluster(_alltoall_steps, 3, args=(4,), env=env):
        assert per_step[-1]["coordinator_rounds"] > per_step[0]["coordinator_rounds"], per_step


def test_sizes_and_inline_allreduce_data_share_the_record() -> None:
    def case() -> None:
        hvd.init()
        n, rank = hvd.size(), hvd.rank()
        for step in range(6):
            # Submitted together, negotiated in one cycle: small allreduces travel inline beside the
            # allgather's and alltoall's new sizes.
            small = [hvd.allreduce_async(np.full(20, rank + i, np.float32), name=f"s{i}", op=hvd.Sum) for i in range(3)]
            gathered = hvd.allgather_async(np.full((rank + step, 2), rank, np.int32), name="g")
            splits = [(rank + i + step) % 2 for i in range(n)]
            exchanged = hvd.alltoall_async(np.full((sum(splits), 1), rank, np.int32), splits=splits, name="a")
            for i, h in enumerate(small):
                assert hvd.synchronize(h).tolist() == [float(sum(r + i for r in range(n)))] * 20
            result = hvd.synchronize(gathered)
            assert result[:, 0].tolist() == [r for r in range(n) for _ in range(r + step)], (step, result)
            received, received_splits = hvd.synchronize(exchanged)
            assert list(received_splits) == [(r + rank + step) % 2 for r in range(n)], received_splits
            assert received[:, 0].tolist() == [r for r in range(n) for _ in range((r + rank + step) % 2)]

    run_cluster(case, 3)


def test_a_joined_member_contributes_nothing_to_cached_allgathers_and_alltoalls() -> None:
    # The cached responses hold rank 2's sizes from before it joined: they must not be used.
    def case() -> object:
        hvd.init()
        n, rank = hvd.size(), hvd.rank()
        splits = [1] * n
        for _ in range(2):
            hvd.allgather(np.full((2, 1), rank, np.int32), name="g")
            hvd.alltoall(np.full((n, 1), rank, np.int32), splits=splits, name="a")
        if rank == 2:
            return hvd.join()
        results = []
        for _ in range(3):
            gathered = hvd.allgather(np.full((2, 1), rank, np.int32), name="g")
            received, received_splits = hvd.alltoall(np.full((n, 1), rank, np.int32), splits=splits, name="a")
            results.append((gathered[:, 0].tolist(), received[:, 0].tolist(), list(received_splits)))
        hvd.join()
        return results

    results = run_cluster(case, 3, timeout=60)
    for rank in (0, 1):
        assert results[rank] == [([0, 0, 1, 1], [0, 1], [1, 1, 0])] * 3, results[rank]


_together = threading.Barrier(3)


@pytest.mark.parametrize("inline_bytes", ["0", "1024"])
def test_a_member_that_joins_right_after_submitting_changed_sizes_is_not_lost(inline_bytes: str) -> None:
    # Rank 2 submits an alltoall whose splits changed and joins at once, while the others submit the
    # cached tensor. With no inline area its request must be renegotiated, and the others may go
    # ahead in that very cycle, counting rank 2 as joined without the tensor: its entry then waits
    # for the coordinator (which runs it once the others joined too). Whichever cycle sees what,
    # every member completes, with rank 2's rows either delivered or not, and nothing else.
    env = {"HOROVOD_NEGOTIATION_INLINE_BYTES": inline_bytes}

    def case() -> object:
        hvd.init()
        n, rank = hvd.size(), hvd.rank()
        hvd.alltoall(np.full((n, 1), rank, np.int32), splits=[1] * n, name="a")
        _together.wait()
        if rank == 2:
            h = hvd.alltoall_async(np.full((2 * n, 1), rank, np.int32), splits=[2] * n, name="a")
            last = hvd.join()
            received, received_splits = hvd.synchronize(h)
            return last, received[:, 0].tolist(), list(received_splits)
        received, received_splits = hvd.alltoall(np.full((n, 1), rank, np.int32), splits=[1] * n, name="a")
        hvd.join()
        return received[:, 0].tolist(), list(received_splits)

    for _ in range(5):
        results = run_cluster(case, 3, env=env, timeout=60)
        for rank in (0, 1):
            assert results[rank] in (([0, 1, 2, 2], [1, 1, 2]), ([0, 1], [1, 1, 0])), results
        last, received, received_splits = results[2]
        assert last in (0, 1), results  # rank 2 joined first
        assert (received, received_splits) in (([0, 1, 2, 2], [1, 1, 2]), ([2, 2], [0, 0, 2])), results
