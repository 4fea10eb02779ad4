"""Eager messages: a cached broadcast's or alltoall's data sent before negotiation says it runs.

The ranks are threads on the in-memory backend, whose eager messages are copies between them
(hvd_backend_ext_v1). Every case checks the data each rank receives, against a reference each
rank computes itself, and the engine's counters say which path the data took.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import numpy as np
import pytest

import horovod.common as hvd
from horovod.common.exceptions import CollectiveMismatchError
from horovod.common.testing import run_cluster
from horovod.common.testing.cases import expect_error
from horovod.common.testing.probes import engine_stats as _stats

ELEMENTS = 64 * 1024  # float32: 256 KiB, larger than the negotiation's inline space can grow to


def test_cached_broadcasts_are_sent_ahead_from_every_root() -> None:
    def case() -> dict:
        hvd.init()
        rank, n = hvd.rank(), hvd.size()
        for step in range(5):
            for root in range(n):
                mine = np.arange(ELEMENTS, dtype=np.float32) + 1000 * rank + step
                got = hvd.broadcast(mine, root_rank=root, name=f"w{root}")
                assert np.array_equal(got, np.arange(ELEMENTS, dtype=np.float32) + 1000 * root + step), (step, root)
                assert mine[0] == 1000 * rank + step, "the broadcast changed its input"
        return _stats()

    for rank, stats in enumerate(run_cluster(case, 3)):
        # The first call of each name is negotiated by the coordinator; the other four go ahead.
        assert stats["eager_sends"] == 4, (rank, stats)
        assert stats["backend_calls"]["broadcast"] == 3, (rank, stats)
        assert stats["eager_drops"] == 0, (rank, stats)


def test_a_process_set_broadcast_is_sent_ahead_from_its_root() -> None:
    def case() -> list:
        upper = hvd.ProcessSet([1, 2])
        hvd.init(process_sets=[upper])
        rank = hvd.rank()
        if rank == 0:
            return []
        got = []
        for step in range(3):
            mine = np.full(ELEMENTS, 10.0 * rank + step, np.float32)
            out = hvd.broadcast(mine, root_rank=2, name="p", process_set=upper)  # global rank 2: member 1
            got.append(float(out[-1]))
        return [*got, _stats()["eager_sends"]]

    results = run_cluster(case, 3)
    assert results[1] == [20.0, 21.0, 22.0, 0] and results[2] == [20.0, 21.0, 22.0, 2], results


def _splits(rank: int, n: int, step: int) -> list[int]:
    return [1 + (rank + peer + step) % 3 for peer in range(n)]


def _alltoall_steps(steps: int, splits_of: Callable[[int, int, int], list[int]]) -> list:
    hvd.init()
    rank, n = hvd.rank(), hvd.size()
    row = 16 * 1024  # elements per row (64 KiB): no member's input fits the inline space
    for step in range(steps):
        splits = [splits_of(r, n, step) for r in range(n)]
        inputs = [np.arange(sum(splits[r]) * row, dtype=np.float32).reshape(-1, row) + 1e4 * r for r in range(n)]
        got, received = hvd.alltoall(inputs[rank], splits=splits[rank], name="a2a")
        expected = []
        for r in range(n):
            start = sum(splits[r][:rank])
            expected.append(inputs[r][start : start + splits[r][rank]])
        assert np.array_equal(got, np.concatenate(expected)), (rank, step)
        assert list(received) == [splits[r][rank] for r in range(n)], (rank, step, received)
    return [_stats()]


def test_cached_alltoalls_are_sent_ahead_with_sizes_that_change() -> None:
    # Every block holds data and the splits change each step (the new ones ride the negotiation).
    for rank, (stats,) in enumerate(run_cluster(_alltoall_steps, 3, args=(5, _splits))):
        assert stats["eager_sends"] == 4, (rank, stats)
        assert stats["backend_calls"]["alltoall"] == 1, (rank, stats)


def _equal_blocks(rows: int, rank: int, n: int, step: int) -> list[int]:
    return [rows] * n  # rows of 64 KiB


@pytest.mark.parametrize(("rows", "ahead"), [(16, True), (17, False)], ids=["1 MiB blocks", "1088 KiB blocks"])
def test_alltoall_blocks_go_ahead_up_to_1_mib(rows: int, ahead: bool) -> None:
    # Copying large blocks out of the receive space costs more than sending them ahead saves. Of 3
    # steps the first is negotiated by the coordinator; the other two go ahead, or all 3 go the
    # usual way.
    for rank, (stats,) in enumerate(run_cluster(_alltoall_steps, 2, args=(3, functools.partial(_equal_blocks, rows)))):
        assert stats["eager_sends"] == (2 if ahead else 0), (rank, stats)
        assert stats["backend_calls"]["alltoall"] == (1 if ahead else 3), (rank, stats)


def _rank0_sends_rank1_nothing(rank: int, n: int, step: int) -> list[int]:
    return [0 if (rank, peer) == (0, 1) else 1 + (rank + peer) % 2 for peer in range(n)]


def test_an_alltoall_member_with_an_empty_block_sends_the_usual_way_beside_the_others() -> None:
    # Rank 0 has nothing for rank 1, so it does not send ahead; ranks 1 and 2 do. Every member's
    # backend call then carries only rank 0's blocks.
    results = run_cluster(_alltoall_steps, 3, args=(4, _rank0_sends_rank1_nothing))
    for rank, (stats,) in enumerate(results):
        assert stats["eager_sends"] == (0 if rank == 0 else 3), (rank, stats)
        assert stats["backend_calls"]["alltoall"] == 4, (rank, stats)


def test_data_sent_ahead_waits_for_a_late_rank() -> None:
    def case() -> dict:
        hvd.init()
        rank = hvd.rank()
        for step in range(4):
            if rank == 1:
                time.sleep(0.05)  # the root's message waits in rank 1's space for several cycles
            got = hvd.broadcast(np.full(ELEMENTS, rank + 10.0 * step, np.float32), root_rank=0, name="late")
            assert (got == 10.0 * step).all(), (rank, step)
        return _stats()

    stats = run_cluster(case, 2)
    assert stats[0]["eager_sends"] == 3 and stats[0]["cycles"] > 8, stats[0]


def test_data_sent_ahead_is_dropped_when_its_tensor_is_renegotiated() -> None:
    """Rank 0 sends its third broadcast of "x" ahead; rank 1 submits "x" with another shape, which
    erases the cached response on every rank. The message is dropped, both ranks raise the mismatch,
    and the space serves the next broadcast."""

    def case() -> list:
        hvd.init()
        rank = hvd.rank()
        for _ in range(2):
            hvd.broadcast(np.full(ELEMENTS, float(rank), np.float32), root_rank=0, name="x")
        shape = ELEMENTS if rank == 0 else ELEMENTS // 2
        if rank == 1:
            time.sleep(0.2)  # rank 0's message is in rank 1's space by then
        error = expect_error(
            CollectiveMismatchError,
            ("Mismatched", "'x'"),
            lambda: hvd.broadcast(np.zeros(shape, np.float32), root_rank=0, name="x"),
        )
        after = [
            float(hvd.broadcast(np.full(ELEMENTS, rank + s, np.float32), root_rank=0, name="y")[0]) for s in range(3)
        ]
        stats = _stats()
        return [error, after, stats["eager_drops"], stats["eager_sends"]]

    for rank, (_, after, drops, sends) in enumerate(run_cluster(case, 2)):
        assert after == [0.0, 1.0, 2.0], (rank, after)
        assert drops == 1, (rank, drops)
        assert sends == (4 if rank == 0 else 0), (rank, sends)  # "x" twice (2nd, 3rd), "y" twice


def test_a_rank_that_joined_drops_data_sent_to_it() -> None:
    def case() -> list:
        hvd.init()
        rank = hvd.rank()
        got = []
        for step in range(3 if rank < 2 else 2):
            got.append(float(hvd.broadcast(np.full(ELEMENTS, rank + step, np.float32), root_rank=0, name="j")[-1]))
        last = hvd.join()
        return [got, last, _stats()["eager_sends"]]

    results = run_cluster(case, 3)
    assert [r[0] for r in results] == [[0.0, 1.0, 2.0], [0.0, 1.0, 2.0], [0.0, 1.0]], results
    assert results[0][2] == 2, results  # the third went ahead too, with rank 2 joined


def records_channel_cycles() -> int:
    hvd.init()
    hvd.allreduce(np.ones(4), name="a")
    stats = _stats()
    return stats["eager_record_cycles"] if stats["eager_record_cycles"] <= stats["cycles"] else -1


def test_negotiation_records_go_over_their_own_channel() -> None:
    for cycles in run_cluster(records_channel_cycles, 3):
        assert cycles > 0, cycles


def test_a_record_carries_only_the_inline_space_it_uses() -> None:
    """With 64 KiB of inline space on every record, a cycle whose op is too large to go inline sends
    the record's header and bitmaps alone; a cycle whose op rides inline sends that op's data too."""

    def case() -> list[float]:
        hvd.init()
        per_record = []
        for elements in (1 << 20, 4096):  # 4 MiB: never inline; 16 KiB: inline
            for _ in range(3):  # cached from the second call on
                hvd.allreduce(np.ones(elements, np.float32), name=f"x{elements}")
            before = _stats()
            for _ in range(5):
                hvd.allreduce(np.ones(elements, np.float32), name=f"x{elements}")
            after = _stats()
            cycles = after["eager_record_cycles"] - before["eager_record_cycles"]
            per_record.append((after["record_bytes_sent"] - before["record_bytes_sent"]) / max(cycles, 1))
        return [*per_record, _stats()["inline_space"]]

    results = run_cluster(case, 2, env={"HOROVOD_NEGOTIATION_INLINE_BYTES": "65536"})
    for rank, (large, small, space) in enumerate(results):
        assert space >= 65536, (rank, space)
        assert 0 < large < 1024, (rank, large)  # the header and bitmaps, not the space
        # The 16 KiB of data beside them (an idle cycle between two calls carries none).
        assert 4096 < small < 2 * 16384, (rank, small)


def test_eager_messages_are_off_at_zero_and_above_the_limit() -> None:
    def case() -> int:
        hvd.init()
        for step in range(3):
            got = hvd.broadcast(np.full(ELEMENTS, hvd.rank() + step, np.float32), root_rank=1, name="b")
            assert (got == 1 + step).all()
        return _stats()["eager_sends"]

    assert run_cluster(case, 2, env={"HOROVOD_NEGOTIATION_EAGER_BYTES": "0"}) == [0, 0]
    # Off, the negotiation records go by allgather too.
    assert run_cluster(records_channel_cycles, 2, env={"HOROVOD_NEGOTIATION_EAGER_BYTES": "0"}) == [0, 0]
    assert run_cluster(case, 2, env={"HOROVOD_NEGOTIATION_EAGER_BYTES": str(4 * ELEMENTS - 1)}) == [0, 0]
    assert run_cluster(case, 2, env={"HOROVOD_NEGOTIATION_EAGER_BYTES": str(4 * ELEMENTS)}) == [0, 2]
