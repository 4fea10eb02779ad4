"""Driving the backend library directly through its C ABI (ctypes), without the engine.

The engine always reduces in place and never calls send/recv, and it cannot be made to stop
taking part in a collective: these tests need the library itself. Members are threads of this
process; the ABI's structures and the store (a dict behind a condition variable, handed to the
library as an hvd_store_v1 of ctypes callbacks) come from hvd-core's test kit.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from ctypes import c_char_p, c_void_p
from typing import Any

import numpy as np

from horovod.backends.gloo import library_path
from horovod.common.testing.backend_abi import (  # noqa: F401  (the tests' names for the ABI)
    CAP_LOW_PRECISION,
    CAP_SEND_RECV,
    DEVICE_CPU,
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
    Store,
    Table,
    comm_create,
    run_threads,
    size_array,
)


def load() -> BackendLibrary:
    """The library's tables, loaded RTLD_LOCAL as the engine loads it."""
    library = BackendLibrary(library_path())
    library.lib.hvd_gloo_transport.restype = c_char_p
    library.lib.hvd_gloo_transport.argtypes = [c_void_p]
    return library


class Comm:
    """One member's communicator; methods take numpy arrays and return the status code."""

    def __init__(self, library: BackendLibrary, handle: int, rank: int, size: int) -> None:
        self.library, self.handle, self.rank, self.size = library, handle, rank, size
        self.table, self.ext = library.table, library.ext

    @property
    def last_error(self) -> str:
        return self.table.last_error(self.handle).decode()

    def allreduce(self, send: np.ndarray, recv: np.ndarray, dtype: str, op: int) -> int:
        return self.table.allreduce(self.handle, send.ctypes.data, recv.ctypes.data, recv.size, DTYPES[dtype], op)

    def allreduce_buffers(
        self, pairs: Sequence[tuple[np.ndarray, np.ndarray]], dtype: str, op: int, postscale: float = 1.0
    ) -> int:
        """The extension's multi-buffer allreduce over (send, recv) arrays."""
        array = (BufferPair * len(pairs))(*[BufferPair(s.ctypes.data, r.ctypes.data, r.size) for s, r in pairs])
        return self.ext.allreduce_buffers(self.handle, array, len(pairs), DTYPES[dtype], op, postscale)

    def eager_open(self, *channel_bytes: int) -> int:
        """Opens one channel per size given."""
        return self.ext.eager_open(self.handle, size_array(channel_bytes), len(channel_bytes))

    def eager_send(self, buf: np.ndarray, peer: int, channel: int = 0) -> int:
        """Starts sending `buf` (kept alive by the caller until eager_wait_sent) to `peer`."""
        return self.ext.eager_send(self.handle, channel, peer, buf.ctypes.data, buf.nbytes)

    def eager_wait_sent(self, peer: int, channel: int = 0) -> int:
        return self.ext.eager_wait_sent(self.handle, channel, peer)

    def eager_receive(self, peer: int, nbytes: int, channel: int = 0) -> tuple[int, bytes]:
        """Waits for `peer`'s oldest unreleased message; returns the status and its first `nbytes` bytes."""
        data = c_void_p()
        rc = self.ext.eager_receive(self.handle, channel, peer, ctypes.byref(data))
        return rc, (ctypes.string_at(data.value, nbytes) if rc == OK else b"")

    def eager_release(self, peer: int, channel: int = 0) -> int:
        return self.ext.eager_release(self.handle, channel, peer)

    def eager_receive_into(self, dst: np.ndarray, peer: int, channel: int = 0) -> int:
        """Takes `peer`'s oldest unreleased message (exactly dst.nbytes long) into `dst` and releases it."""
        return self.ext.eager_receive_into(self.handle, channel, peer, dst.ctypes.data, dst.nbytes)

    def allgatherv(self, send: np.ndarray, recv: np.ndarray, counts: Sequence[int], dtype: str) -> int:
        return self.table.allgatherv(self.handle, send.ctypes.data, recv.ctypes.data, size_array(counts), DTYPES[dtype])

    def broadcast(self, buf: np.ndarray, dtype: str, root: int) -> int:
        return self.table.broadcast(self.handle, buf.ctypes.data, buf.size, DTYPES[dtype], root)

    def alltoallv(
        self, send: np.ndarray, sendcounts: Sequence[int], recv: np.ndarray, recvcounts: Sequence[int], dtype: str
    ) -> int:
        return self.table.alltoallv(
            self.handle,
            send.ctypes.data,
            size_array(sendcounts),
            recv.ctypes.data,
            size_array(recvcounts),
            DTYPES[dtype],
        )

    def reducescatter(self, send: np.ndarray, recv: np.ndarray, counts: Sequence[int], dtype: str, op: int) -> int:
        return self.table.reducescatter(
            self.handle, send.ctypes.data, recv.ctypes.data, size_array(counts), DTYPES[dtype], op
        )

    def barrier(self) -> int:
        return self.table.barrier(self.handle)

    @property
    def transport(self) -> str:
        return self.library.lib.hvd_gloo_transport(self.handle).decode()

    def send(self, buf: np.ndarray, peer: int, tag: int) -> int:
        return self.table.send(self.handle, buf.ctypes.data, buf.nbytes, peer, tag)

    def recv(self, buf: np.ndarray, peer: int, tag: int) -> int:
        return self.table.recv(self.handle, buf.ctypes.data, buf.nbytes, peer, tag)

    def destroy(self) -> None:
        if self.handle:
            self.table.comm_destroy(self.handle)
            self.handle = None


def create(library: BackendLibrary, store: Store, rank: int, size: int, prefix: str, timeout_ms: int) -> Comm:
    """comm_create for one member (collective: every member must call it)."""
    return Comm(library, comm_create(library.table, store, rank, range(size), prefix, timeout_ms), rank, size)


def run_members(
    size: int, fn: Callable[[Comm], Any], *, timeout_ms: int = 20000, prefix: str = "t", join_timeout: float = 60.0
) -> list[Any]:
    """Creates a communicator of `size` members (threads) and runs fn(comm) on each; returns results.

    A member's exception is re-raised here; each communicator is destroyed when its fn returns.
    """
    library, store = load(), Store()

    def member(rank: int) -> Any:
        comm = create(library, store, rank, size, prefix, timeout_ms)
        try:
            return fn(comm)
        finally:
            comm.destroy()

    return run_threads(size, member, join_timeout)
