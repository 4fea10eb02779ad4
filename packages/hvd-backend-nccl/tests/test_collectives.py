"""Every collective of the ABI, on the fake NCCL and the simulated device, members as threads.

Results are checked against what every member can compute itself; the fake's log shows which
NCCL calls the backend chose (ncclAllGather for even blocks, grouped send/recv for ragged ones).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import _abi

NUMPY = {
    "uint8": np.uint8,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "float32": np.float32,
    "float64": np.float64,
    "bool": np.bool_,
}
REDUCIBLE = [d for d in NUMPY if d != "int16"]


def values(dtype: str, rank: int, count: int) -> np.ndarray:
    """Small values whose sums, products, minima and maxima are exact in every dtype."""
    if dtype == "bool":
        return (np.arange(count) + rank) % 3 == 0
    return ((np.arange(count) % 3) + rank + 1).astype(NUMPY[dtype])


def reference(dtype: str, op: int, arrays: list[np.ndarray]) -> np.ndarray:
    if dtype == "bool":
        return np.logical_and.reduce(arrays) if op in (_abi.MIN, _abi.PRODUCT) else np.logical_or.reduce(arrays)
    wide = [a.astype(np.float64) for a in arrays]
    combine = {_abi.SUM: np.add, _abi.MIN: np.minimum, _abi.MAX: np.maximum, _abi.PRODUCT: np.multiply}[op]
    return combine.reduce(wide).astype(NUMPY[dtype])


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("dtype", REDUCIBLE)
def test_allreduce_every_op(backend, device, fake, size: int, dtype: str) -> None:
    count = 7

    def member(comm: _abi.Comm) -> None:
        for op in (_abi.SUM, _abi.MIN, _abi.MAX, _abi.PRODUCT):
            mine = values(dtype, comm.rank, count)
            send = comm.upload(mine)
            recv = send if op % 2 else comm.upload(np.zeros_like(mine))  # in place and not
            assert comm.allreduce(send, recv, count, dtype, op) == _abi.OK, comm.last_error
            got = comm.download(recv, mine)
            expected = reference(dtype, op, [values(dtype, r, count) for r in range(comm.size)])
            np.testing.assert_array_equal(got.astype(np.float64), expected.astype(np.float64))

    _abi.run_members(backend, device, size, member)


def test_int16_is_moved_but_not_reduced(backend, device, fake) -> None:
    def member(comm: _abi.Comm) -> None:
        buf = comm.upload(values("int16", comm.rank, 4))
        assert comm.allreduce(buf, buf, 4, "int16", _abi.SUM) == _abi.UNSUPPORTED
        assert "cannot reduce int16" in comm.last_error and "NCCL 2.30.7" in comm.last_error, comm.last_error
        assert comm.broadcast(buf, 4, "int16", 1) == _abi.OK, comm.last_error  # still usable
        np.testing.assert_array_equal(comm.download(buf, values("int16", 0, 4)), values("int16", 1, 4))

    _abi.run_members(backend, device, 2, member)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int16", "bool"])
def test_broadcast(backend, device, fake, dtype: str) -> None:
    def member(comm: _abi.Comm) -> None:
        buf = comm.upload(values(dtype, comm.rank, 5))
        assert comm.broadcast(buf, 5, dtype, 2) == _abi.OK, comm.last_error
        np.testing.assert_array_equal(comm.download(buf, values(dtype, 0, 5)), values(dtype, 2, 5))
        assert comm.broadcast(buf, 5, dtype, 3) == _abi.INVALID_ARGUMENT
        assert "root 3" in comm.last_error

    _abi.run_members(backend, device, 3, member)


@pytest.mark.parametrize("counts", [[3, 3, 3], [2, 0, 5], [0, 0, 1]])
def test_allgatherv(backend, device, fake, counts: list[int]) -> None:
    def member(comm: _abi.Comm) -> None:
        mine = values("float64", comm.rank, counts[comm.rank])
        send = comm.upload(mine)
        recv = comm.upload(np.zeros(sum(counts)))
        assert comm.allgatherv(send, recv, counts, "float64") == _abi.OK, comm.last_error
        expected = np.concatenate([values("float64", r, counts[r]) for r in range(comm.size)])
        np.testing.assert_array_equal(comm.download(recv, expected), expected)

    _abi.run_members(backend, device, 3, member)
    calls = fake.log()
    if len(set(counts)) == 1:
        assert sum("ncclAllGather" in c for c in calls) == 3 and not any("ncclSend" in c for c in calls)
    else:
        # Ragged: one send per peer of each member with data, none of zero bytes.
        sends = [c for c in calls if c.startswith("ncclSend")]
        assert len(sends) == sum(2 for n in counts if n) and not any("count=0" in c for c in sends), sends


def test_alltoallv_skips_empty_messages(backend, device, fake) -> None:
    # send[i][j]: elements member i sends member j (zeros on and off the diagonal).
    send = [[1, 0, 2], [3, 0, 0], [0, 4, 5]]

    def member(comm: _abi.Comm) -> None:
        r = comm.rank
        sendcounts = send[r]
        recvcounts = [send[i][r] for i in range(comm.size)]
        blocks = [np.full(n, 10 * r + j, np.int32) for j, n in enumerate(sendcounts)]
        sendbuf = comm.upload(np.concatenate(blocks))
        recvbuf = comm.upload(np.zeros(sum(recvcounts), np.int32))
        assert comm.alltoallv(sendbuf, sendcounts, recvbuf, recvcounts, "int32") == _abi.OK, comm.last_error
        expected = np.concatenate([np.full(n, 10 * i + r, np.int32) for i, n in enumerate(recvcounts)])
        np.testing.assert_array_equal(comm.download(recvbuf, expected), expected)

    _abi.run_members(backend, device, 3, member)
    calls = fake.log()
    off_diagonal = sum(1 for i in range(3) for j in range(3) if i != j and send[i][j])
    assert sum(c.startswith("ncclSend") for c in calls) == off_diagonal
    assert sum(c.startswith("ncclRecv") for c in calls) == off_diagonal


@pytest.mark.parametrize("counts", [[2, 2, 2], [3, 0, 1]])
def test_reducescatter(backend, device, fake, counts: list[int]) -> None:
    total = sum(counts)

    def member(comm: _abi.Comm) -> None:
        send = comm.upload(values("float32", comm.rank, total))
        recv = comm.upload(np.zeros(max(1, counts[comm.rank]), np.float32))
        assert comm.reducescatter(send, recv, counts, "float32", _abi.SUM) == _abi.OK, comm.last_error
        full = reference("float32", _abi.SUM, [values("float32", r, total) for r in range(comm.size)])
        start = sum(counts[: comm.rank])
        expected = full[start : start + counts[comm.rank]]
        np.testing.assert_array_equal(comm.download(recv, expected), expected)

    _abi.run_members(backend, device, 3, member)
    calls = fake.log()
    if len(set(counts)) == 1:
        assert sum(c.startswith("ncclReduceScatter") for c in calls) == 3
    else:
        # One rooted reduce per non-empty block on each member, in one group.
        reduces = [c for c in calls if c.startswith("ncclReduce ")]
        assert len(reduces) == 3 * sum(1 for n in counts if n), reduces
        assert not any("root=1" in c for c in reduces)  # member 1's block is empty


def test_barrier(backend, device, fake) -> None:
    def member(comm: _abi.Comm) -> None:
        for _ in range(3):
            assert comm.barrier() == _abi.OK, comm.last_error
        device.synchronize(comm.stream)

    _abi.run_members(backend, device, 3, member)
    assert sum(c.startswith("ncclAllReduce") and "count=1 " in c for c in fake.log()) == 9


def test_an_unknown_dtype_is_refused_not_moved_as_nothing(backend, device, fake) -> None:
    def member(comm: _abi.Comm) -> None:
        buf = comm.upload(np.ones(4, np.float32))
        assert comm.table.broadcast(comm.handle, buf, 4, 42, 0) == _abi.INVALID_ARGUMENT
        assert comm.last_error.endswith("unknown dtype 42"), comm.last_error
        assert comm.table.allreduce(comm.handle, buf, buf, 4, 42, _abi.SUM) == _abi.UNSUPPORTED

    _abi.run_members(backend, device, 2, member)
    assert not fake.log()
