"""The shared-memory transport: when it is chosen, and collectives that move through it in pieces.

Members are threads of this process (one host), so the transport is chosen unless the store shows a
member elsewhere or HOROVOD_GLOO_SHARED_MEMORY=0. Slot sizes are made small here so that buffers of
a few KiB already take many pieces, and both ways of reducing a piece (every member folding the
whole piece, or each member one part of it) are exercised with uneven splits.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import _abi


def transports(size: int) -> list[str]:
    return _abi.run_members(size, lambda comm: comm.transport)


def test_members_on_one_host_use_shared_memory_unless_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    assert transports(2) == ["shared memory"] * 2
    assert transports(3) == ["shared memory"] * 3
    assert transports(1) == ["local"]
    monkeypatch.setenv("HOROVOD_GLOO_SHARED_MEMORY", "0")
    assert transports(2) == ["tcp"] * 2


class _StoreWithAMemberElsewhere(_abi.Store):
    """Rewrites what member 1 publishes about its host, as if it ran on another machine."""

    def _set(self, ctx, key, value, length):
        if key.endswith(b"/gloo/shm/host/1"):
            other = _abi.ctypes.create_string_buffer(b"another host")
            return super()._set(ctx, key, _abi.ctypes.addressof(other), len(other.value))
        return super()._set(ctx, key, value, length)


def test_one_member_elsewhere_puts_every_member_on_tcp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_abi, "Store", _StoreWithAMemberElsewhere)

    def member(comm: _abi.Comm) -> tuple[str, list[float]]:
        buf = np.full(5, comm.rank + 1, np.float32)
        assert comm.allreduce(buf, buf, "float32", _abi.SUM) == _abi.OK, comm.last_error
        return comm.transport, buf.tolist()

    assert _abi.run_members(3, member) == [("tcp", [6.0] * 5)] * 3


@pytest.mark.parametrize(
    ("slot_bytes", "count"),
    [(4096, 10_000), (256 * 1024, 1_000_003)],  # whole-piece folds; parts of uneven size
)
@pytest.mark.parametrize("size", [2, 3])
def test_collectives_in_many_pieces(monkeypatch: pytest.MonkeyPatch, slot_bytes: int, count: int, size: int) -> None:
    monkeypatch.setenv("HOROVOD_GLOO_SHARED_MEMORY_SLOT_BYTES", str(slot_bytes))

    def member(comm: _abi.Comm) -> None:
        assert comm.transport == "shared memory"
        base = (np.arange(count) % 97).astype(np.float32)  # exact in float32 when summed
        for in_place in (True, False):
            send = base + comm.rank
            recv = send if in_place else np.full(count, -1, np.float32)
            assert comm.allreduce(send, recv, "float32", _abi.SUM) == _abi.OK, comm.last_error
            np.testing.assert_array_equal(recv, base * comm.size + sum(range(comm.size)))
        maxed = base * (comm.rank + 1)
        assert comm.allreduce(maxed, maxed, "float32", _abi.MAX) == _abi.OK, comm.last_error
        np.testing.assert_array_equal(maxed, base * comm.size)

        counts = [count // 3 * (r % 2) + r for r in range(comm.size)]  # member 0 sends nothing
        gathered = np.full(sum(counts), -1, np.int32)
        mine = np.full(counts[comm.rank], comm.rank, np.int32)
        assert comm.allgatherv(mine, gathered, counts, "int32") == _abi.OK, comm.last_error
        np.testing.assert_array_equal(gathered, np.repeat(np.arange(comm.size, dtype=np.int32), counts))

        scattered = np.full(counts[comm.rank], -1, np.float32)
        rows = (np.arange(sum(counts)) % 89).astype(np.float32) * (comm.rank + 1)
        assert comm.reducescatter(rows, scattered, counts, "float32", _abi.SUM) == _abi.OK, comm.last_error
        first = sum(counts[: comm.rank])
        expected = (np.arange(first, first + counts[comm.rank]) % 89).astype(np.float32) * sum(range(1, comm.size + 1))
        np.testing.assert_array_equal(scattered, expected)

        # Member r sends (r + q) % 3 * count // 7 rows to member q: uneven, some empty.
        sends = [(comm.rank + q) % 3 * (count // 7) for q in range(comm.size)]
        recvs = [(p + comm.rank) % 3 * (count // 7) for p in range(comm.size)]
        outgoing = np.concatenate([np.full(c, comm.rank * 100 + q, np.int32) for q, c in enumerate(sends)])
        incoming = np.full(sum(recvs), -1, np.int32)
        assert comm.alltoallv(outgoing, sends, incoming, recvs, "int32") == _abi.OK, comm.last_error
        expected = np.concatenate([np.full(c, p * 100 + comm.rank, np.int32) for p, c in enumerate(recvs)])
        np.testing.assert_array_equal(incoming, expected)

        root = comm.size - 1
        data = base + 1000 if comm.rank == root else np.zeros(count, np.float32)
        assert comm.broadcast(data, "float32", root) == _abi.OK, comm.last_error
        np.testing.assert_array_equal(data, base + 1000)
        assert comm.barrier() == _abi.OK, comm.last_error

    _abi.run_members(size, member, timeout_ms=60000)


def test_every_member_gets_the_same_bits_when_parts_are_reduced_by_different_members() -> None:
    # Above 64 KiB a piece is split into parts, each reduced by one member (its own contribution
    # first) and copied by the others: inexact float sums must still agree bit for bit.
    rng = np.random.default_rng(11)
    inputs = [rng.standard_normal(100_003).astype(np.float32) for _ in range(3)]

    def member(comm: _abi.Comm) -> bytes:
        assert comm.transport == "shared memory"
        out = np.empty_like(inputs[comm.rank])
        assert comm.allreduce(inputs[comm.rank], out, "float32", _abi.SUM) == _abi.OK, comm.last_error
        np.testing.assert_allclose(out, sum(x.astype(np.float64) for x in inputs), rtol=1e-5, atol=1e-5)
        return out.tobytes()

    results = _abi.run_members(3, member)
    assert results[0] == results[1] == results[2], "members got different bits"


def test_slot_settings_that_are_too_small_or_not_a_number_still_work(monkeypatch: pytest.MonkeyPatch) -> None:
    # A slot must hold alltoallv's table of counts; "4M" is not a number of bytes (the default applies).
    for setting in ("8", "4M"):
        monkeypatch.setenv("HOROVOD_GLOO_SHARED_MEMORY_SLOT_BYTES", setting)

        def member(comm: _abi.Comm) -> list[int]:
            assert comm.transport == "shared memory"
            sent = np.arange(comm.size, dtype=np.int32) + 10 * comm.rank
            received = np.empty(comm.size, np.int32)
            ones = [1] * comm.size
            assert comm.alltoallv(sent, ones, received, ones, "int32") == _abi.OK, comm.last_error
            return received.tolist()

        assert _abi.run_members(3, member) == [[10 * p + r for p in range(3)] for r in range(3)]


def ours() -> set[str]:
    """This process's regions in /dev/shm (member 0 names them after its pid)."""
    return {name for name in os.listdir("/dev/shm") if name.startswith(f"hvd-gloo-{os.getpid()}-")}


def test_no_region_is_left_in_dev_shm() -> None:
    # Rank 0 removes the region's name once every member has mapped it: a job leaves nothing
    # behind, however it ends.
    def member(comm: _abi.Comm) -> set[str]:
        assert comm.transport == "shared memory"
        assert comm.barrier() == _abi.OK, comm.last_error
        return ours()

    assert _abi.run_members(3, member) == [set()] * 3
    assert ours() == set()


class _StoreThatNeverHearsFromMember1(_abi.Store):
    """Whether member 1 mapped the region never arrives: set-up fails after the region exists."""

    def _get(self, ctx, key, value, length, timeout_ms):
        if key.endswith(b"/gloo/shm/mapped/1"):
            return _abi.TIMEOUT
        return super()._get(ctx, key, value, length, timeout_ms)


def test_a_set_up_that_fails_half_way_leaves_no_region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_abi, "Store", _StoreThatNeverHearsFromMember1)
    with pytest.raises(AssertionError, match="comm_create failed"):
        _abi.run_members(2, lambda comm: None, timeout_ms=2000)
    assert ours() == set()


# Collectives each member calls differently, as (what rank 0 calls, what the others call). Over TCP
# Gloo's own checks fail such calls; through shared memory the members compare what each announced.
def _allreduce(count: int) -> Any:
    return lambda comm: comm.allreduce(np.ones(count, np.float32), np.empty(count, np.float32), "float32", _abi.SUM)


def _broadcast(count: int, root: int = 0) -> Any:
    return lambda comm: comm.broadcast(np.ones(count, np.float32), "float32", root)


def _allgather(count: int) -> Any:
    def call(comm: _abi.Comm) -> int:
        counts = [count + r if comm.rank == 0 else count for r in range(comm.size)]  # rank 0 disagrees
        return comm.allgatherv(
            np.ones(counts[comm.rank], np.float32), np.empty(sum(counts), np.float32), counts, "float32"
        )

    return call


MISMATCHES = {
    "sizes": (
        _allreduce(16),
        _allreduce(32),
        "allreduce of 64 bytes of float32 (sum)",
        "allreduce of 128 bytes of float32 (sum)",
    ),
    "kinds": (
        _allreduce(16),
        _broadcast(16),
        "allreduce of 64 bytes of float32 (sum)",
        "broadcast of 64 bytes from root 0",
    ),
    "roots": (
        _broadcast(16, root=0),
        _broadcast(16, root=1),
        "broadcast of 64 bytes from root 0",
        "broadcast of 64 bytes from root 1",
    ),
    "barrier": (lambda comm: comm.barrier(), _allreduce(4), "barrier", "allreduce of 16 bytes of float32 (sum)"),
}


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("case", sorted(MISMATCHES))
def test_members_called_with_different_collectives_all_fail_naming_both(case: str, size: int) -> None:
    first, others, first_says, others_say = MISMATCHES[case]

    def member(comm: _abi.Comm) -> tuple[str, int, str, int, str]:
        assert comm.transport == "shared memory"
        rc = (first if comm.rank == 0 else others)(comm)
        message = comm.last_error
        again = comm.barrier()  # a communicator out of step is not used again
        return (comm.transport, rc, message, again, comm.last_error)

    results = _abi.run_members(size, member, timeout_ms=10000)
    for rank, (_, rc, message, again, again_message) in enumerate(results):
        assert rc == _abi.INVALID_ARGUMENT, (rank, message)
        # Each member names a peer that announced something else, and what it was called with itself.
        theirs, mine = (others_say, first_says) if rank == 0 else (first_says, others_say)
        assert f"collective mismatch: rank {1 if rank == 0 else 0} called {theirs}, this member {mine}" in message, (
            rank,
            message,
        )
        assert again == _abi.INVALID_ARGUMENT and "unusable after an earlier failure" in again_message, again_message


def test_members_that_pass_different_counts_to_a_v_collective_fail() -> None:
    def member(comm: _abi.Comm) -> tuple[int, str]:
        rc = _allgather(8)(comm)
        return (rc, comm.last_error)

    for rank, (rc, message) in enumerate(_abi.run_members(2, member, timeout_ms=10000)):
        assert rc == _abi.INVALID_ARGUMENT and "collective mismatch" in message, (rank, message)
        assert "allgather of 68 bytes in all" in message and "allgather of 64 bytes in all" in message, message


def test_counts_split_differently_and_scales_that_differ_are_named() -> None:
    def split(comm: _abi.Comm) -> tuple[int, str]:
        counts = [4, 6] if comm.rank == 0 else [6, 4]  # the same 40 bytes, split differently
        rc = comm.reducescatter(
            np.ones(10, np.float32), np.empty(counts[comm.rank], np.float32), counts, "float32", _abi.SUM
        )
        return (rc, comm.last_error)

    for rank, (rc, message) in enumerate(_abi.run_members(2, split, timeout_ms=10000)):
        assert rc == _abi.INVALID_ARGUMENT, message
        assert (
            f"rank {1 - rank} called reducescatter of 40 bytes of float32 (sum), this member reducescatter of 40 "
            "bytes of float32 (sum) (alike in size, but not in the counts or element size)"
        ) in message, message

    def scaled(comm: _abi.Comm) -> tuple[int, str]:
        data = np.ones(8, np.float32)
        rc = comm.allreduce_buffers([(data, data)], "float32", _abi.SUM, postscale=0.5 if comm.rank == 0 else 1.0)
        return (rc, comm.last_error)

    (rc0, message0), (rc1, message1) = _abi.run_members(2, scaled, timeout_ms=10000)
    assert rc0 == rc1 == _abi.INVALID_ARGUMENT, (message0, message1)
    assert (
        "rank 1 called allreduce of 32 bytes of float32 (sum), this member allreduce of 32 bytes of float32 "
        "(sum, results scaled by 0.500000)"
    ) in message0, message0
