"""Failures never hang: NCCL's errors (at once or asynchronous), members that never arrive, and
abort, seen on every member, each with a message naming the op, the member and NCCL's release.

The engine's part is played here: after queuing, a member polls async_error (as the engine does
while it waits for its completion event), and on an error aborts and destroys the communicator.
Every wait is bounded; no test depends on how long anything takes.
"""

from __future__ import annotations

import time

import numpy as np

import _abi

NCCL_UNHANDLED_CUDA_ERROR, NCCL_REMOTE_ERROR = 1, 6


def poll(comm: _abi.Comm, limit: float = 30.0) -> int:
    """async_error until it reports something, as the engine polls while it waits (bounded)."""
    deadline = time.monotonic() + limit
    while (status := comm.async_error()) == _abi.OK:
        assert time.monotonic() < deadline, "async_error reported nothing"
        time.sleep(0.01)
    return status


def test_an_asynchronous_error_is_reported_and_abort_ends_every_member(backend, device, fake) -> None:
    def member(comm: _abi.Comm) -> tuple[int, str, int]:
        buf = comm.upload(np.ones(8, np.float32))
        assert comm.allreduce(buf, buf, 8, "float32", _abi.SUM) == _abi.OK, comm.last_error
        device.synchronize(comm.stream)
        if comm.rank == 1:
            fake.set_async_error(1, NCCL_REMOTE_ERROR)  # e.g. a peer's network failed
        # Every member queues the next allreduce; member 1 finds its error first and never joins,
        # so the others' allreduce cannot complete: they reach their timeout.
        status = poll(comm) if comm.rank == 1 else _abi.OK
        if status == _abi.OK:
            assert comm.allreduce(buf, buf, 8, "float32", _abi.SUM) == _abi.OK, comm.last_error
            status = poll(comm)
        message = comm.last_error
        assert comm.abort() == _abi.OK
        device.synchronize(comm.stream)  # abort drained the stream
        # Every later call fails at once, with the first failure.
        again = comm.allreduce(buf, buf, 8, "float32", _abi.SUM)
        assert comm.last_error == message
        return status, message, again

    results = _abi.run_members(backend, device, 3, member, timeout_ms=1000)
    status, message, again = results[1]
    assert status == again == _abi.PEER_LOST
    assert message.startswith("nccl allreduce (rank 1 of 3, NCCL 2.30.7): NCCL reported an asynchronous error")
    assert "remote process exited or there was a network error" in message
    for status, message, again in (results[0], results[2]):
        assert status == again == _abi.TIMEOUT, message
        assert "allreduce of 32 bytes queued" in message and "within the communicator's timeout of 1.0 s" in message
    assert fake.live_comms() == 0


def test_a_member_that_never_arrives_is_a_timeout_not_a_hang(backend, device, fake) -> None:
    def member(comm: _abi.Comm) -> tuple[int, str]:
        if comm.rank == 2:
            return _abi.OK, ""  # never takes part: its peers' first collective cannot even begin
        buf = comm.upload(np.ones(4, np.float64))
        rc = comm.allreduce(buf, buf, 4, "float64", _abi.SUM)
        status = rc if rc != _abi.OK else poll(comm)
        message = comm.last_error
        comm.abort()
        return status, message

    results = _abi.run_members(backend, device, 3, member, timeout_ms=500)
    # Member 0 made the id and waits for member 2 to join the NCCL communicator; member 1 too.
    for status, message in results[:2]:
        assert status == _abi.TIMEOUT, message
        assert "NCCL did not finish setting up or queuing the operation within 0.5 s" in message, message
    assert fake.live_comms() == 0


def test_the_unique_id_that_never_comes_is_a_timeout_naming_member_0(backend, device, fake) -> None:
    def member(comm: _abi.Comm) -> tuple[int, str]:
        if comm.rank == 0:
            return _abi.OK, ""
        buf = comm.upload(np.ones(1, np.float32))
        return comm.broadcast(buf, 1, "float32", 0), comm.last_error

    status, message = _abi.run_members(backend, device, 2, member, timeout_ms=300, prefix="job/")[1]
    assert status == _abi.TIMEOUT
    assert "nccl broadcast (rank 1 of 2, NCCL 2.30.7): the NCCL unique id from member 0 (rank 0)" in message
    assert "did not arrive within 0.3 s (store key 'job/nccl/unique-id'" in message


def test_a_failed_creation_names_nccl_words_and_fails_every_member(backend, device, fake) -> None:
    fake.fail_next(0, "ncclCommInitRankConfig", NCCL_UNHANDLED_CUDA_ERROR)

    def member(comm: _abi.Comm) -> tuple[int, str]:
        buf = comm.upload(np.ones(2, np.float32))
        rc = comm.allreduce(buf, buf, 2, "float32", _abi.SUM)
        return (rc if rc != _abi.OK else poll(comm)), comm.last_error

    results = _abi.run_members(backend, device, 2, member, timeout_ms=500)
    status, message = results[0]
    assert status == _abi.INTERNAL
    assert message.startswith("nccl allreduce (rank 0 of 2, NCCL 2.30.7): creating the NCCL communicator: ")
    assert "ncclCommInitRankConfig failed: unhandled cuda error (run with NCCL_DEBUG=INFO for details)" in message
    assert results[1][0] == _abi.TIMEOUT, results[1][1]  # its peer never joins


def test_a_failed_call_aborts_the_communicator(backend, device, fake) -> None:
    def member(comm: _abi.Comm) -> tuple[int, str]:
        buf = comm.upload(np.ones(2, np.float32))
        assert comm.barrier() == _abi.OK, comm.last_error  # the communicator exists
        if comm.rank == 1:
            fake.fail_next(1, "ncclAllReduce", 5)  # ncclInvalidUsage
            return comm.allreduce(buf, buf, 2, "float32", _abi.SUM), comm.last_error
        rc = comm.allreduce(buf, buf, 2, "float32", _abi.SUM)
        return (rc if rc != _abi.OK else poll(comm)), comm.last_error

    results = _abi.run_members(backend, device, 2, member, timeout_ms=500)
    status, message = results[1]
    assert status == _abi.INVALID_ARGUMENT
    assert message == (
        "nccl allreduce (rank 1 of 2, NCCL 2.30.7): ncclAllReduce failed: invalid usage "
        "(run with NCCL_DEBUG=WARN for details) (fake NCCL's last error)"
    )
    assert results[0][0] == _abi.TIMEOUT
    assert fake.live_comms() == 0
