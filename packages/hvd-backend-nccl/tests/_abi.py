"""Driving the backend library through its C ABI (ctypes), with members as threads of this process.

The backend runs on the fake NCCL (fake_nccl/, built by conftest.py) and hvd-core's simulated
device: each member has its own stream, and device buffers are made and read through the device
table (_device.py). The ABI's structures and the store come from hvd-core's test kit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from _device import Device
from horovod.common.testing.backend_abi import (  # noqa: F401  (the tests' names for the ABI)
    CAP_LOW_PRECISION,
    DEVICE_CUDA,
    DTYPES,
    INTERNAL,
    INVALID_ARGUMENT,
    MAX,
    MIN,
    OK,
    PEER_LOST,
    PRODUCT,
    SUM,
    TIMEOUT,
    UNSUPPORTED,
    BackendLibrary,
    BufferPair,
    Config,
    Extensions,
    Store,
    Table,
    comm_create,
    run_threads,
    size_array,
)


class Comm:
    """One member's communicator on its own stream; collectives take device addresses."""

    def __init__(self, backend: BackendLibrary, device: Device, handle: int, rank: int, size: int, stream: int) -> None:
        self.backend, self.device, self.handle = backend, device, handle
        self.rank, self.size, self.stream = rank, size, stream
        self.table, self.ext = backend.table, backend.ext

    @property
    def last_error(self) -> str:
        return self.table.last_error(self.handle).decode()

    # Device buffers on this member's stream.
    def upload(self, array: np.ndarray) -> int:
        return self.device.upload(array, self.stream)

    def download(self, address: int, like: np.ndarray) -> np.ndarray:
        return self.device.download(address, like, self.stream)

    def allreduce(self, send: int, recv: int, count: int, dtype: str, op: int) -> int:
        return self.table.allreduce(self.handle, send, recv, count, DTYPES[dtype], op)

    def allreduce_buffers(self, pairs: Sequence[tuple[int, int, int]], dtype: str, op: int, postscale: float) -> int:
        array = (BufferPair * max(1, len(pairs)))(*[BufferPair(s, r, n) for s, r, n in pairs])
        return self.ext.allreduce_buffers(self.handle, array, len(pairs), DTYPES[dtype], op, postscale)

    def allgatherv(self, send: int, recv: int, counts: Sequence[int], dtype: str) -> int:
        return self.table.allgatherv(self.handle, send, recv, size_array(counts), DTYPES[dtype])

    def broadcast(self, buf: int, count: int, dtype: str, root: int) -> int:
        return self.table.broadcast(self.handle, buf, count, DTYPES[dtype], root)

    def alltoallv(self, send: int, sendcounts: Sequence[int], recv: int, recvcounts: Sequence[int], dtype: str) -> int:
        return self.table.alltoallv(
            self.handle, send, size_array(sendcounts), recv, size_array(recvcounts), DTYPES[dtype]
        )

    def reducescatter(self, send: int, recv: int, counts: Sequence[int], dtype: str, op: int) -> int:
        return self.table.reducescatter(self.handle, send, recv, size_array(counts), DTYPES[dtype], op)

    def barrier(self) -> int:
        return self.table.barrier(self.handle)

    def async_error(self) -> int:
        return self.ext.async_error(self.handle)

    def abort(self) -> int:
        return self.ext.abort(self.handle)

    def destroy(self) -> None:
        if self.handle:
            self.table.comm_destroy(self.handle)
            self.handle = 0


def create(
    backend: BackendLibrary,
    device: Device,
    store: Store,
    rank: int,
    job_ranks: Sequence[int],
    prefix: str,
    timeout_ms: int,
    stream: int,
) -> Comm:
    """comm_create for one member (the NCCL communicator itself comes at the first collective)."""
    handle = comm_create(
        backend.table,
        store,
        rank,
        job_ranks,
        prefix,
        timeout_ms,
        device_kind=DEVICE_CUDA,
        device_id=0,
        device=device.address,
        stream=stream,
    )
    return Comm(backend, device, handle, rank, len(job_ranks), stream)


def run_members(
    backend: BackendLibrary,
    device: Device,
    size: int,
    fn: Callable[[Comm], Any],
    *,
    timeout_ms: int = 20000,
    prefix: str = "t/",
    join_timeout: float = 60.0,
    store: Store | None = None,
) -> list[Any]:
    """Makes a communicator of ``size`` members (threads, each with its own stream) and runs
    ``fn(comm)`` on each; returns their results. A member's exception is re-raised here; each
    communicator is destroyed and each stream drained and destroyed when its ``fn`` returns."""
    shared_store = store or Store()

    def member(rank: int) -> Any:
        stream = device.stream()
        try:
            comm = create(backend, device, shared_store, rank, list(range(size)), prefix, timeout_ms, stream)
            try:
                return fn(comm)
            finally:
                comm.destroy()
        finally:
            device.destroy_stream(stream)

    return run_threads(size, member, join_timeout)
