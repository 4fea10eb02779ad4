"""The library through its C ABI directly: what the engine never exercises.

The engine always reduces in place, never sends point to point, and validates arguments before
they reach a backend; these tests cover the rest (see _abi.py for the harness).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import _abi
from horovod.backends.gloo import __version__

# Every test here runs over both transports (conftest.py).
pytestmark = pytest.mark.usefixtures("transport")


def test_function_table() -> None:
    table = _abi.load().table
    assert table.abi_version == 1 and table.struct_size == _abi.ctypes.sizeof(_abi.Table)
    assert table.name == b"gloo" and table.version.decode() == __version__
    assert table.device_kinds == _abi.DEVICE_CPU and table.capabilities == _abi.CAP_SEND_RECV | _abi.CAP_LOW_PRECISION


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("in_place", [True, False])
def test_large_allreduce_of_uneven_blocks(size: int, in_place: bool) -> None:
    # 3 MiB and an odd count: over TCP a reducescatter and an allgather whose blocks differ in size
    # (2 and 3 members), through shared memory several slots' worth with a ragged last piece.
    count = 3 * 262144 + 7

    def member(comm: _abi.Comm) -> None:
        send = (np.arange(count) % 11 + comm.rank).astype(np.float32)
        recv = send if in_place else np.full(count, -1, np.float32)
        before = send.copy()
        assert comm.allreduce(send, recv, "float32", _abi.SUM) == _abi.OK, comm.last_error
        expected = sum((np.arange(count) % 11 + r).astype(np.float32) for r in range(comm.size))
        np.testing.assert_array_equal(recv, expected)
        if not in_place:
            np.testing.assert_array_equal(send, before)

    _abi.run_members(size, member)


def allreduce_bits_on_every_member(size: int) -> None:
    """Allreduces of sizes each side of every switch between algorithms, in place and not, twice.

    Every member must get the very same bits, call after call. Over TCP a buffer of up to
    2 MiB x n/2/(n-1) is one exchange round, a larger one a pipelined reducescatter and allgather in
    segments of up to 512 KiB per block (collectives.cc). The in-place exchange must not send from
    the buffer it folds into; the in-place pipeline must not receive into a segment before it is
    folded, nor reuse a receive slot whose segment is not folded yet (many segments, ragged ones:
    the 9 MiB + 5 buffer).
    """
    exchange_limit = (2 << 20) * size // (2 * (size - 1)) // 4
    rng = np.random.default_rng(7)
    counts = (3, exchange_limit, exchange_limit + 1, (1 << 20) // 4 * size + 1, (9 << 20) // 4 + 5)
    inputs = {count: [rng.standard_normal(count).astype(np.float32) for _ in range(size)] for count in counts}

    def member(comm: _abi.Comm) -> list:
        results = []
        for per_rank in inputs.values():
            for round_ in range(2):
                send = per_rank[comm.rank] * (round_ + 1)
                recv = send if round_ % 2 else np.empty_like(send)
                assert comm.allreduce(send, recv, "float32", _abi.SUM) == _abi.OK, comm.last_error
                expected = sum(x.astype(np.float64) for x in per_rank) * (round_ + 1)
                np.testing.assert_allclose(recv, expected, rtol=1e-5, atol=1e-5)
                results.append(recv.tobytes())
        return results

    per_member = _abi.run_members(size, member, timeout_ms=60000)
    assert all(r == per_member[0] for r in per_member[1:]), "members got different bits"


@pytest.mark.parametrize("size", [2, 3, 4])
def test_every_allreduce_algorithm_agrees_bitwise_on_every_rank(size: int) -> None:
    allreduce_bits_on_every_member(size)


@pytest.mark.parametrize("size", [2, 3])
def test_gloo_ring_allreduce_when_asked(size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # HOROVOD_GLOO_RING_ALLREDUCE_BYTES=0 hands every allreduce that is not small to Gloo's ring.
    # The setting is read once per process: the members run in a process of their own.
    monkeypatch.setenv("HOROVOD_GLOO_RING_ALLREDUCE_BYTES", "0")
    tests = str(Path(__file__).parent)
    script = (
        f"import sys; sys.path.insert(0, {tests!r}); import test_abi; test_abi.allreduce_bits_on_every_member({size})"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr


def test_zero_element_collectives() -> None:
    def member(comm: _abi.Comm) -> None:
        empty = np.zeros(0, np.float32)
        zeros = [0] * comm.size
        assert comm.allreduce(empty, empty, "float32", _abi.SUM) == _abi.OK, comm.last_error
        assert comm.allgatherv(empty, empty, zeros, "float32") == _abi.OK, comm.last_error
        assert comm.broadcast(empty, "float32", 0) == _abi.OK, comm.last_error
        assert comm.alltoallv(empty, zeros, empty, zeros, "float32") == _abi.OK, comm.last_error
        assert comm.reducescatter(empty, empty, zeros, "float32", _abi.SUM) == _abi.OK, comm.last_error
        assert comm.barrier() == _abi.OK, comm.last_error
        # The communicator still works afterwards.
        one = np.ones(3, np.int64)
        assert comm.allreduce(one, one, "int64", _abi.SUM) == _abi.OK and one.tolist() == [comm.size] * 3

    _abi.run_members(3, member)


def test_uneven_alltoallv_and_reducescatter_with_empty_blocks() -> None:
    n = 3

    def member(comm: _abi.Comm) -> None:
        rank = comm.rank
        # Member r sends (r + p) % 3 elements to member p: some blocks are empty.
        sendcounts = [(rank + p) % n for p in range(n)]
        recvcounts = [(q + rank) % n for q in range(n)]
        send = np.concatenate([np.full(c, 10 * rank + p, np.int32) for p, c in enumerate(sendcounts)])
        recv = np.full(sum(recvcounts), -1, np.int32)
        assert comm.alltoallv(send, sendcounts, recv, recvcounts, "int32") == _abi.OK, comm.last_error
        expected = np.concatenate([np.full(c, 10 * q + rank, np.int32) for q, c in enumerate(recvcounts)])
        np.testing.assert_array_equal(recv, expected)

        counts = [2, 0, 3]  # member 1 receives nothing
        data = np.arange(sum(counts), dtype=np.float64) + rank
        out = np.full(counts[rank], -1.0)
        assert comm.reducescatter(data, out, counts, "float64", _abi.MAX) == _abi.OK, comm.last_error
        start = sum(counts[:rank])
        np.testing.assert_array_equal(out, np.arange(start, start + counts[rank], dtype=np.float64) + (n - 1))

    _abi.run_members(n, member)


@pytest.mark.parametrize("size", [2, 3, 4])
def test_broadcast_from_every_root_reaches_every_member(size: int) -> None:
    # Over TCP a binomial tree of direct transfers: with 4 members one member receives from another
    # that is not the root. 8 MiB is more than a socket's buffers hold, so a transfer only ends if
    # the receiver reads while the sender writes.
    counts = (5, 2 * 1024 * 1024 + 3)

    def member(comm: _abi.Comm) -> None:
        for count in counts:
            for root in range(comm.size):
                buf = (np.arange(count) % 97 + 1000 * root).astype(np.float32)
                if comm.rank != root:
                    buf[:] = -1
                assert comm.broadcast(buf, "float32", root) == _abi.OK, comm.last_error
                np.testing.assert_array_equal(buf, (np.arange(count) % 97 + 1000 * root).astype(np.float32))

    _abi.run_members(size, member, timeout_ms=60000)


def test_large_alltoallv_blocks_cross_both_ways_at_once() -> None:
    # Every member sends and receives blocks of megabytes at the same time (more than the sockets
    # hold both ways): the exchange must read while it writes, or two members would wait on each
    # other. Uneven, so a wrong offset shows.
    n, unit = 3, 256 * 1024

    def member(comm: _abi.Comm) -> None:
        rank = comm.rank
        sendcounts = [(rank + p + 1) * unit + p for p in range(n)]
        recvcounts = [(q + rank + 1) * unit + rank for q in range(n)]
        send = np.concatenate([np.full(c, 10 * rank + p, np.int32) for p, c in enumerate(sendcounts)])
        recv = np.full(sum(recvcounts), -1, np.int32)
        assert comm.alltoallv(send, sendcounts, recv, recvcounts, "int32") == _abi.OK, comm.last_error
        expected = np.concatenate([np.full(c, 10 * q + rank, np.int32) for q, c in enumerate(recvcounts)])
        np.testing.assert_array_equal(recv, expected)

    _abi.run_members(n, member, timeout_ms=60000)


def test_send_and_recv() -> None:
    def member(comm: _abi.Comm) -> None:
        payload = np.arange(100000, dtype=np.int64)
        if comm.rank == 0:
            assert comm.send(payload, 1, 7) == _abi.OK, comm.last_error
            assert comm.send(np.zeros(0, np.int64), 1, 8) == _abi.OK, comm.last_error
            answer = np.zeros(1, np.int64)
            assert comm.recv(answer, 1, 9) == _abi.OK, comm.last_error
            assert answer[0] == int(payload.sum())
        else:
            got = np.zeros_like(payload)
            assert comm.recv(got, 0, 7) == _abi.OK, comm.last_error
            assert comm.recv(np.zeros(0, np.int64), 0, 8) == _abi.OK, comm.last_error
            np.testing.assert_array_equal(got, payload)
            assert comm.send(np.array([got.sum()], np.int64), 0, 9) == _abi.OK, comm.last_error
        bad = np.zeros(1, np.int64)
        assert comm.send(bad, comm.rank, 0) == _abi.INVALID_ARGUMENT
        assert "not another member" in comm.last_error
        assert comm.recv(bad, 5, 0) == _abi.INVALID_ARGUMENT

    _abi.run_members(2, member)


def test_invalid_arguments_are_refused_without_breaking_the_communicator() -> None:
    def member(comm: _abi.Comm) -> None:
        buf = np.ones(2, np.float32)
        assert comm.broadcast(buf, "float32", comm.size) == _abi.INVALID_ARGUMENT
        assert "gloo broadcast" in comm.last_error and "out of range" in comm.last_error
        assert (
            comm.table.allreduce(comm.handle, buf.ctypes.data, buf.ctypes.data, 2, 42, _abi.SUM)
            == _abi.INVALID_ARGUMENT
        )
        assert comm.allreduce(buf, buf, "float32", _abi.SUM) == _abi.OK, comm.last_error
        assert buf.tolist() == [comm.size] * 2

    _abi.run_members(2, member)


def test_comm_create_refuses_what_it_cannot_serve() -> None:
    library, store = _abi.load(), _abi.Store()
    with pytest.raises(RuntimeError, match=r"\(1\): gloo: rank 2 is out of range for size 2"):
        _abi.create(library, store, 2, 2, "bad", 1000)
    config = _abi.Config(_abi.ctypes.sizeof(_abi.Config), 0, 1, None, b"cuda", 1000, 2, 0)
    handle = _abi.ctypes.c_void_p()
    error = _abi.ctypes.create_string_buffer(256)
    rc = library.table.comm_create(
        _abi.ctypes.byref(config), _abi.ctypes.byref(store.struct), _abi.ctypes.byref(handle), error, 256
    )
    assert rc == _abi.UNSUPPORTED and b"CPU" in error.value and not handle.value


def test_interface_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    def member(comm: _abi.Comm) -> list:
        buf = np.full(4, comm.rank + 1, np.int32)
        assert comm.allreduce(buf, buf, "int32", _abi.SUM) == _abi.OK, comm.last_error
        return buf.tolist()

    monkeypatch.setenv("HOROVOD_GLOO_IFACE", "lo")
    assert _abi.run_members(2, member) == [[3] * 4] * 2
    monkeypatch.setenv("HOROVOD_GLOO_IFACE", "no-such-iface0")
    with pytest.raises(AssertionError, match="HOROVOD_GLOO_IFACE=no-such-iface0 names no usable network interface"):
        _abi.run_members(2, member, timeout_ms=5000)


@pytest.mark.parametrize("size", [2, 3])
def test_multi_buffer_allreduce_is_one_allreduce_of_the_buffers_in_order(size: int) -> None:
    # hvd_backend_ext_v1::allreduce_buffers: the engine's fused tensors, read and written where
    # they are. Buffers of every kind: empty, tiny, one crossing the 4 MiB slot's pieces, in place
    # and not; integer-valued floats so that sums are exact and the scale's rounding is float32's.
    # Also, first on a new communicator, a batch small enough for TCP's one-round exchange (whose
    # receive space must not be where the buffers are packed) and for one whole fold.
    large = [0, 1, 1000, 3, 1_300_007, 0, 17, 262_144]
    small = [3] * 20
    scale = 1 / 3

    def member(comm: _abi.Comm) -> list[bytes]:
        results = []
        for round_, counts in enumerate([small, large, small, large]):
            sends = [((np.arange(c) % 13) + comm.rank + round_).astype(np.float32) for c in counts]
            before = [s.copy() for s in sends]
            recvs = [s if i % 2 else np.full_like(s, -1) for i, s in enumerate(sends)]
            assert (
                comm.allreduce_buffers(list(zip(sends, recvs, strict=True)), "float32", _abi.SUM, scale) == _abi.OK
            ), comm.last_error
            for i, (c, recv) in enumerate(zip(counts, recvs, strict=True)):
                total = sum(((np.arange(c) % 13) + r + round_).astype(np.float32) for r in range(comm.size))
                np.testing.assert_array_equal(recv, total * np.float32(scale), err_msg=f"buffer {i}")
                if i % 2 == 0:
                    np.testing.assert_array_equal(sends[i], before[i], err_msg=f"input of buffer {i} changed")
            results.append(b"".join(r.tobytes() for r in recvs))
        return results

    per_member = _abi.run_members(size, member, timeout_ms=60000)
    assert all(r == per_member[0] for r in per_member[1:]), "members got different bits"


def test_multi_buffer_allreduce_scales_integers_as_the_engine_does() -> None:
    # hvd::scale: computed in double, truncated toward zero (an Average of integers). One buffer
    # is small enough to be folded by every member, the other is reduced part by part.
    def member(comm: _abi.Comm) -> None:
        small = np.array([7, -7, 100], np.int32) * (comm.rank + 1)
        large = np.arange(70_000, dtype=np.int32) * (comm.rank + 1)
        assert comm.allreduce_buffers([(small, small), (large, large)], "int32", _abi.SUM, 1 / 3) == _abi.OK, (
            comm.last_error
        )
        np.testing.assert_array_equal(small, np.trunc(np.array([21, -21, 300]) * (1 / 3)).astype(np.int32))
        np.testing.assert_array_equal(large, np.trunc(np.arange(70_000) * 3 * (1 / 3)).astype(np.int32))

    _abi.run_members(2, member)


def test_multi_buffer_allreduce_refuses_to_scale_bool_and_accepts_no_buffers() -> None:
    def member(comm: _abi.Comm) -> None:
        flags = np.array([True, False])
        assert comm.allreduce_buffers([(flags, flags)], "bool", _abi.MAX, 0.5) == _abi.INVALID_ARGUMENT
        assert "bool cannot be scaled" in comm.last_error and "rank" in comm.last_error, comm.last_error
        assert comm.allreduce_buffers([], "float32", _abi.SUM, 0.5) == _abi.OK, comm.last_error

    _abi.run_members(2, member)


def test_eager_messages_are_opened_over_tcp_only(transport: str) -> None:
    def member(comm: _abi.Comm) -> int:
        return comm.eager_open(4096, 1 << 20)

    expected = _abi.OK if transport == "tcp" else _abi.UNSUPPORTED
    assert _abi.run_members(2, member) == [expected] * 2


@pytest.mark.parametrize("size", [2, 3])
def test_eager_messages_reach_every_peer_in_order_on_each_channel(size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each round every member sends each peer a message on both channels before the peers ask for
    # them, and a second one on channel 1 before the peers have released the first: up to two
    # unreleased messages per channel and peer wait in the receives kept posted. Messages shorter
    # than a channel's space, and as long as it.
    monkeypatch.setenv("HOROVOD_GLOO_SHARED_MEMORY", "0")
    spaces = (4096, 256 * 1024)

    def message(channel: int, sender: int, receiver: int, round_: int, second: bool = False) -> np.ndarray:
        length = spaces[channel] if (round_ + second) % 2 else 100 + 10 * sender + receiver
        values = np.arange(length, dtype=np.int64) * 31 + 7 * sender + 3 * receiver + 5 * round_ + 11 * channel + second
        return values.astype(np.uint8)

    def member(comm: _abi.Comm) -> None:
        me, peers = comm.rank, [p for p in range(comm.size) if p != comm.rank]
        assert comm.eager_open(*spaces) == _abi.OK, comm.last_error

        def send_all(channel: int, round_: int, second: bool = False) -> list[np.ndarray]:
            sent = [message(channel, me, p, round_, second) for p in peers]
            for p, buf in zip(peers, sent, strict=True):
                assert comm.eager_send(buf, p, channel) == _abi.OK, comm.last_error
            return sent

        def wait_all(channel: int) -> None:
            for p in peers:
                assert comm.eager_wait_sent(p, channel) == _abi.OK, comm.last_error

        def take(channel: int, peer: int, expected: np.ndarray) -> None:
            rc, got = comm.eager_receive(peer, expected.nbytes, channel)
            assert rc == _abi.OK, comm.last_error
            assert got == expected.tobytes(), (me, peer, channel)
            assert comm.eager_receive(peer, 8, channel) == (_abi.OK, got[:8])  # again: the same message
            assert comm.eager_release(peer, channel) == _abi.OK, comm.last_error

        for round_ in range(4):
            keep = [send_all(0, round_), send_all(1, round_)]
            wait_all(1)
            keep.append(send_all(1, round_, second=True))
            for p in peers:
                take(0, p, message(0, p, me, round_))
                take(1, p, message(1, p, me, round_))
                take(1, p, message(1, p, me, round_, second=True))
            wait_all(0)
            wait_all(1)
            del keep
        assert comm.barrier() == _abi.OK, comm.last_error

    _abi.run_members(size, member)


def test_eager_messages_a_departed_peer_sent_are_still_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    # A peer that has sent its last messages and destroyed its communicator (a member of a removed
    # process set, after the set's last cycle) closes the connection while the others still take
    # and release those messages. Releasing one posts its receive again, which the closed
    # connection refuses: that must not fail the release of a message that arrived, only a
    # receive that waits for a message the peer can no longer send.
    monkeypatch.setenv("HOROVOD_GLOO_SHARED_MEMORY", "0")
    departed = threading.Event()
    messages = [np.arange(64, dtype=np.uint8) + 1, np.arange(64, dtype=np.uint8) + 2]

    def member(comm: _abi.Comm) -> None:
        assert comm.eager_open(1024) == _abi.OK, comm.last_error
        if comm.rank == 1:
            for buf in messages:  # both fit in the receives kept posted for this peer
                assert comm.eager_send(buf, 0) == _abi.OK, comm.last_error
                assert comm.eager_wait_sent(0) == _abi.OK, comm.last_error
            comm.destroy()
            departed.set()
            return
        assert departed.wait(30)
        time.sleep(0.5)  # for Gloo's device thread to read the closed connection
        for buf in messages:
            assert comm.eager_receive(1, buf.nbytes) == (_abi.OK, buf.tobytes()), comm.last_error
            assert comm.eager_release(1) == _abi.OK, comm.last_error
        assert comm.eager_receive(1, 8)[0] == _abi.PEER_LOST
        assert "rank 0 of 2" in comm.last_error and "lost the connection" in comm.last_error, comm.last_error

    _abi.run_members(2, member)


def test_eager_messages_taken_into_place_whole_half_arrived_or_not_yet_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    # eager_receive_into, in each state the message can be in when it is called: already whole in
    # the receive space (copied), half read into the space (the rest read straight into place: the
    # 32 MiB message is more than the sockets hold while its sender waits elsewhere, so a receive
    # of the message before it leaves this one half read), and not sent yet (read straight into
    # place). Messages on the space's normal path before and after show that the space stays in
    # step.
    monkeypatch.setenv("HOROVOD_GLOO_SHARED_MEMORY", "0")
    space = 32 << 20
    small = [np.arange(100, dtype=np.uint8) + k for k in range(4)]
    large = (np.arange(space // 8, dtype=np.int64) * 2654435761).view(np.uint8)

    def member(comm: _abi.Comm) -> None:
        assert comm.eager_open(space) == _abi.OK, comm.last_error
        if comm.rank == 1:
            for buf in (small[0], small[1]):  # both fit in the space: the first receive reads both
                assert comm.eager_send(buf, 0) == _abi.OK and comm.eager_wait_sent(0) == _abi.OK, comm.last_error
            assert comm.barrier() == _abi.OK, comm.last_error
            assert comm.eager_send(small[2], 0) == _abi.OK and comm.eager_wait_sent(0) == _abi.OK, comm.last_error
            assert comm.eager_send(large, 0) == _abi.OK, comm.last_error  # only part of it leaves now
            assert comm.barrier() == _abi.OK, comm.last_error
            assert comm.eager_wait_sent(0) == _abi.OK, comm.last_error
            assert comm.barrier() == _abi.OK, comm.last_error  # the receiver waits before this one is sent
            assert comm.eager_send(small[3], 0) == _abi.OK and comm.eager_wait_sent(0) == _abi.OK, comm.last_error
            return
        assert comm.barrier() == _abi.OK, comm.last_error
        assert comm.eager_receive(1, 100) == (_abi.OK, small[0].tobytes()), comm.last_error
        assert comm.eager_release(1) == _abi.OK, comm.last_error
        whole = np.zeros(100, np.uint8)
        assert comm.eager_receive_into(whole, 1) == _abi.OK, comm.last_error
        assert whole.tobytes() == small[1].tobytes()
        assert comm.barrier() == _abi.OK, comm.last_error
        assert comm.eager_receive(1, 100) == (_abi.OK, small[2].tobytes()), comm.last_error
        assert comm.eager_release(1) == _abi.OK, comm.last_error
        half = np.zeros_like(large)
        assert comm.eager_receive_into(half, 1) == _abi.OK, comm.last_error
        np.testing.assert_array_equal(half, large)
        assert comm.barrier() == _abi.OK, comm.last_error
        later = np.zeros(100, np.uint8)
        assert comm.eager_receive_into(later, 1) == _abi.OK, comm.last_error
        assert later.tobytes() == small[3].tobytes()

    _abi.run_members(2, member, timeout_ms=30000)


def test_eager_misuse_is_refused_with_what_is_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOROVOD_GLOO_SHARED_MEMORY", "0")

    def member(comm: _abi.Comm) -> None:
        peer = 1 - comm.rank
        small = np.ones(16, np.uint8)
        assert comm.eager_send(small, peer) == _abi.INVALID_ARGUMENT
        assert "not opened" in comm.last_error
        assert (
            comm.eager_open(1024, 0) == _abi.INVALID_ARGUMENT and "no space asked for on channel 1" in comm.last_error
        )
        assert comm.eager_open(1024) == _abi.OK, comm.last_error
        assert comm.eager_open(1024) == _abi.INVALID_ARGUMENT and "already open" in comm.last_error
        assert comm.eager_send(small, peer, channel=1) == _abi.INVALID_ARGUMENT
        assert "channel 1 was not opened" in comm.last_error
        assert comm.eager_send(np.ones(1025, np.uint8), peer) == _abi.INVALID_ARGUMENT
        assert "1025 bytes" in comm.last_error and "1 to 1024 bytes" in comm.last_error
        assert comm.eager_send(small, comm.rank) == _abi.INVALID_ARGUMENT and "not another member" in comm.last_error
        assert comm.eager_release(peer) == _abi.INVALID_ARGUMENT and "no message" in comm.last_error
        assert comm.eager_send(small, peer) == _abi.OK, comm.last_error
        assert comm.eager_send(small, peer) == _abi.INVALID_ARGUMENT and "still in flight" in comm.last_error
        assert comm.eager_wait_sent(peer) == _abi.OK, comm.last_error
        assert comm.eager_receive(peer, 16) == (_abi.OK, small.tobytes())
        assert comm.eager_receive_into(np.zeros(16, np.uint8), peer) == _abi.INVALID_ARGUMENT
        assert "a message is still held" in comm.last_error, comm.last_error
        assert comm.eager_release(peer) == _abi.OK, comm.last_error
        assert comm.eager_receive_into(np.zeros(1025, np.uint8), peer) == _abi.INVALID_ARGUMENT
        assert "1025 bytes (1 to 1024 bytes into a destination)" in comm.last_error, comm.last_error
        # None of the refusals broke the communicator.
        buf = np.full(4, comm.rank, np.int32)
        assert comm.allreduce(buf, buf, "int32", _abi.SUM) == _abi.OK, comm.last_error
        assert buf.tolist() == [1] * 4
        # A message of another length than the receiver takes it as does: both lengths named.
        assert comm.eager_send(small, peer) == _abi.OK and comm.eager_wait_sent(peer) == _abi.OK, comm.last_error
        assert comm.eager_receive_into(np.zeros(8, np.uint8), peer) == _abi.INVALID_ARGUMENT
        assert "collective mismatch: the peer sent a message of 16 bytes, where this member expected 8" in (
            comm.last_error
        ), comm.last_error

    _abi.run_members(2, member)
