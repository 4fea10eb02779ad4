"""A rank that does not take part, or disappears, becomes a clear error, not a hang.

Through the engine: a rank that arrives after HOROVOD_GLOO_TIMEOUT_SECONDS makes the others fail
with HorovodInternalError naming gloo, the missing rank and the timeout. Through the C ABI (the
engine keeps every rank negotiating, so it cannot leave a collective unmatched): a collective a
peer never joins times out, and a peer that closes its connections is reported as lost without
waiting for the timeout; over both transports (conftest.py). Every test is bounded by its cluster's
or harness's own time limit.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import _abi
import horovod.common as hvd
from horovod.common.testing import run_cluster


def test_a_rank_that_never_arrives_fails_init_within_the_timeout() -> None:
    def case() -> tuple[str, float]:
        from horovod.common.testing.probes import job_topology

        rank = job_topology().rank  # known before init(): the test kit's launch
        if rank == 1:
            time.sleep(4)  # past HOROVOD_GLOO_TIMEOUT_SECONDS=2: rank 0 has given up by now
        start = time.monotonic()
        try:
            hvd.init()
        except hvd.HorovodInternalError as error:
            return str(error), time.monotonic() - start
        hvd.shutdown()
        return "", time.monotonic() - start

    (error0, _), (error1, _) = run_cluster(
        case, 2, backend="gloo", env={"HOROVOD_GLOO_TIMEOUT_SECONDS": "2"}, timeout=60
    )
    assert "gloo" in error0 and "rank 1 did not arrive within 2 s" in error0, error0
    assert "HOROVOD_GLOO_TIMEOUT_SECONDS" in error0, error0
    # Rank 1 sees that rank 0 arrived, but rank 0 has given up: rank 1 fails too, naming rank 0.
    assert "gloo: could not connect rank 1 of 2: rank 0 did not publish its Gloo address" in error1, error1


@pytest.mark.usefixtures("transport")
def test_a_collective_a_peer_never_joins_times_out() -> None:
    done = threading.Event()

    def member(comm: _abi.Comm) -> tuple[int, str, int, str]:
        if comm.rank == 1:
            done.wait(30)  # connected, but never calls the collective
            return (0, "", 0, "")
        buf = np.ones(4, np.float32)
        try:
            rc = comm.allreduce(buf, buf, "float32", _abi.SUM)
            message = comm.last_error
            again = comm.barrier()  # the context is unusable after Gloo failed
            return (rc, message, again, comm.last_error)
        finally:
            done.set()

    (rc, message, again, again_message), _ = _abi.run_members(2, member, timeout_ms=2000)
    assert rc == _abi.TIMEOUT, message
    assert message.startswith("gloo allreduce (rank 0 of 2, waiting on rank 1): timed out after 2 s"), message
    assert "HOROVOD_GLOO_TIMEOUT_SECONDS" in message, message
    assert again == _abi.TIMEOUT and "unusable after an earlier failure" in again_message, again_message


def test_a_peer_that_disappears_is_reported_lost_before_the_timeout(transport: str) -> None:
    gone = threading.Event()

    def member(comm: _abi.Comm) -> tuple[int, str]:
        if comm.rank == 1:
            comm.destroy()  # closes its connections, as a crashed process would
            gone.set()
            return (0, "")
        gone.wait(30)
        buf = np.ones(1 << 20, np.float32)
        rc = comm.allreduce(buf, buf, "float32", _abi.SUM)
        return (rc, comm.last_error)

    (rc, message), _ = _abi.run_members(2, member, timeout_ms=30000)
    # PEER_LOST rather than TIMEOUT: found out from the closed connection (or, in shared memory,
    # the peer's mark that it has left), not by waiting 30 s.
    assert rc == _abi.PEER_LOST, message
    lost = {"tcp": "lost the connection to a peer", "shared memory": "lost the peer: it closed its communicator"}
    assert message.startswith("gloo allreduce (rank 0 of 2, waiting on rank 1)") and lost[transport] in message, message


@pytest.mark.parametrize("count", [1 << 18, 1 << 21], ids=["one round", "pipelined"])
def test_a_lost_peer_is_named_while_the_wait_is_on_another(count: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Over TCP, 3 members: rank 2 has closed its connections and rank 0 has not called the
    # allreduce yet. Rank 1 waits for rank 0's data first (both algorithms fold in rank order), but
    # its transfer with rank 2 can no longer finish: it fails at once, naming rank 2, instead of
    # waiting for rank 0 until the timeout. Rank 0 only returns once rank 1 has failed.
    monkeypatch.setenv("HOROVOD_GLOO_SHARED_MEMORY", "0")
    gone, failed = threading.Event(), threading.Event()

    def member(comm: _abi.Comm) -> tuple[int, str] | None:
        if comm.rank == 2:
            comm.destroy()
            gone.set()
            return None
        if comm.rank == 0:
            failed.wait(60)
            return None
        gone.wait(30)
        buf = np.ones(count, np.float32)
        try:
            return (comm.allreduce(buf, buf, "float32", _abi.SUM), comm.last_error)
        finally:
            failed.set()

    _, (rc, message), _ = _abi.run_members(3, member, timeout_ms=30000)
    assert rc == _abi.PEER_LOST, message
    assert message.startswith("gloo allreduce (rank 1 of 3, waiting on rank 2): lost the connection"), message


def test_a_transfer_whose_members_disagree_on_its_length_fails_naming_both(monkeypatch: pytest.MonkeyPatch) -> None:
    # Over TCP a broadcast's data goes whole from the root to each member, framed by its length: a
    # member called with another count learns it from the frame, before any byte lands in its
    # buffer. (The engine agrees sizes before it calls a backend; this is the backend's own guard.)
    # The root's 16 MiB does not fit in the sockets' buffers (4 MiB to send at most, and the
    # receiver's grows only as it reads), so the root learns of the failure too, without waiting for
    # the timeout.
    monkeypatch.setenv("HOROVOD_GLOO_SHARED_MEMORY", "0")
    counts = {0: 4 * 1024 * 1024, 1: 1024 * 1024}

    def member(comm: _abi.Comm) -> tuple[int, str, bool]:
        buf = np.full(counts[comm.rank], comm.rank, np.float32)
        rc = comm.broadcast(buf, "float32", 0)
        return (rc, comm.last_error, bool((buf[: counts[1]] == comm.rank).all()))

    (rc0, message0, _), (rc1, message1, untouched1) = _abi.run_members(2, member, timeout_ms=30000)
    assert rc1 == _abi.INVALID_ARGUMENT, message1
    assert message1.startswith("gloo broadcast (rank 1 of 2, waiting on rank 0): "), message1
    assert "collective mismatch: the peer sent a message of 16777216 bytes, where this member expected 4194304" in (
        message1
    ), message1
    assert untouched1, "the mismatched message was written into the receiver's buffer"
    assert rc0 == _abi.PEER_LOST, message0
    assert message0.startswith("gloo broadcast (rank 0 of 2, waiting on rank 1): lost the connection"), message0
