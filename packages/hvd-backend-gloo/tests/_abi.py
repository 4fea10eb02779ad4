"""Driving the backend library directly through its C ABI (ctypes), without the engine.

The engine always reduces in place and never calls send/recv, and it cannot be made to stop
taking part in a collective: these tests need the library itself. Members are threads of this
process; the store is a dict behind a condition variable, handed to the library as an
hvd_store_v1 of ctypes callbacks.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable, Sequence
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char_p,
    c_double,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Any

import numpy as np

from horovod.backends.gloo import library_path

OK, INVALID_ARGUMENT, UNSUPPORTED, TIMEOUT, PEER_LOST, INTERNAL = range(6)
DTYPES = {
    "uint8": 0,
    "int8": 1,
    "int16": 2,
    "int32": 3,
    "int64": 4,
    "float16": 5,
    "bfloat16": 6,
    "float32": 7,
    "float64": 8,
    "bool": 9,
}
SUM, MIN, MAX, PRODUCT = range(4)
DEVICE_CPU = 1
CAP_SEND_RECV = 1
CAP_LOW_PRECISION = 4

_SET = CFUNCTYPE(c_int, c_void_p, c_char_p, c_void_p, c_size_t)
_GET = CFUNCTYPE(c_int, c_void_p, c_char_p, POINTER(c_void_p), POINTER(c_size_t), c_int64)
_RELEASE = CFUNCTYPE(None, c_void_p, c_void_p)


class _StoreStruct(Structure):
    _fields_ = [("ctx", c_void_p), ("set", _SET), ("get", _GET), ("release", _RELEASE)]


class Config(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("rank", c_int32),
        ("size", c_int32),
        ("job_ranks", POINTER(c_int32)),
        ("key_prefix", c_char_p),
        ("timeout_ms", c_int64),
        ("device_kind", c_uint32),
        ("device_id", c_int32),
    ]


class _Table(Structure):
    _fields_ = [
        ("abi_version", c_uint32),
        ("struct_size", c_uint32),
        ("name", c_char_p),
        ("version", c_char_p),
        ("device_kinds", c_uint32),
        ("reserved", c_uint32),
        ("capabilities", c_uint64),
        (
            "comm_create",
            CFUNCTYPE(c_int, POINTER(Config), POINTER(_StoreStruct), POINTER(c_void_p), c_char_p, c_size_t),
        ),
        ("comm_destroy", CFUNCTYPE(None, c_void_p)),
        ("last_error", CFUNCTYPE(c_char_p, c_void_p)),
        ("allreduce", CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_int)),
        ("allgatherv", CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p, POINTER(c_size_t), c_int)),
        ("broadcast", CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t, c_int, c_int32)),
        ("alltoallv", CFUNCTYPE(c_int, c_void_p, c_void_p, POINTER(c_size_t), c_void_p, POINTER(c_size_t), c_int)),
        ("reducescatter", CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p, POINTER(c_size_t), c_int, c_int)),
        ("barrier", CFUNCTYPE(c_int, c_void_p)),
        ("send", CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t, c_int32, c_int32)),
        ("recv", CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t, c_int32, c_int32)),
    ]


class _BufferPair(Structure):
    _fields_ = [("sendbuf", c_void_p), ("recvbuf", c_void_p), ("count", c_size_t)]


class _Extensions(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("reserved", c_uint32),
        ("allreduce_buffers", CFUNCTYPE(c_int, c_void_p, POINTER(_BufferPair), c_size_t, c_int, c_int, c_double)),
        ("eager_open", CFUNCTYPE(c_int, c_void_p, POINTER(c_size_t), c_int32)),
        ("eager_send", CFUNCTYPE(c_int, c_void_p, c_int32, c_int32, c_void_p, c_size_t)),
        ("eager_wait_sent", CFUNCTYPE(c_int, c_void_p, c_int32, c_int32)),
        ("eager_receive", CFUNCTYPE(c_int, c_void_p, c_int32, c_int32, POINTER(c_void_p))),
        ("eager_release", CFUNCTYPE(c_int, c_void_p, c_int32, c_int32)),
        ("eager_receive_into", CFUNCTYPE(c_int, c_void_p, c_int32, c_int32, c_void_p, c_size_t)),
    ]


def load() -> _Table:
    """The library's function table, loaded RTLD_LOCAL as the engine loads it."""
    lib = ctypes.CDLL(library_path(), mode=os.RTLD_LOCAL | os.RTLD_NOW)
    get = lib.hvd_backend_v1_get
    get.restype = POINTER(_Table)
    table = get().contents
    table._lib = lib  # keep the library referenced as long as the table
    get_extensions = lib.hvd_backend_ext_v1_get
    get_extensions.restype = POINTER(_Extensions)
    table._extensions = get_extensions().contents
    lib.hvd_gloo_transport.restype = c_char_p
    lib.hvd_gloo_transport.argtypes = [c_void_p]
    return table


class Store:
    """An hvd_store_v1 over a dict (the engine's in-memory store, in Python)."""

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._cv = threading.Condition()
        self._handed_out: dict[int, ctypes.Array] = {}
        self._callbacks = (_SET(self._set), _GET(self._get), _RELEASE(self._release))
        self.struct = _StoreStruct(None, *self._callbacks)

    def _set(self, ctx: Any, key: bytes, value: int, length: int) -> int:
        with self._cv:
            self._data[key] = ctypes.string_at(value, length) if length else b""
            self._cv.notify_all()
        return OK

    def _get(self, ctx: Any, key: bytes, value: Any, length: Any, timeout_ms: int) -> int:
        with self._cv:
            if not self._cv.wait_for(lambda: key in self._data, timeout_ms / 1000.0):
                return TIMEOUT
            data = self._data[key]
        buf = ctypes.create_string_buffer(data, max(1, len(data)))
        address = ctypes.addressof(buf)
        self._handed_out[address] = buf
        value[0] = address
        length[0] = len(data)
        return OK

    def _release(self, ctx: Any, value: int) -> None:
        self._handed_out.pop(value, None)


class Comm:
    """One member's communicator; methods take numpy arrays and return the status code."""

    def __init__(self, table: _Table, handle: int, rank: int, size: int) -> None:
        self.table, self.handle, self.rank, self.size = table, handle, rank, size

    @property
    def last_error(self) -> str:
        return self.table.last_error(self.handle).decode()

    def allreduce(self, send: np.ndarray, recv: np.ndarray, dtype: str, op: int) -> int:
        return self.table.allreduce(self.handle, send.ctypes.data, recv.ctypes.data, recv.size, DTYPES[dtype], op)

    def allreduce_buffers(
        self, pairs: Sequence[tuple[np.ndarray, np.ndarray]], dtype: str, op: int, postscale: float = 1.0
    ) -> int:
        """The extension's multi-buffer allreduce over (send, recv) arrays."""
        array = (_BufferPair * len(pairs))(*[_BufferPair(s.ctypes.data, r.ctypes.data, r.size) for s, r in pairs])
        return self.table._extensions.allreduce_buffers(self.handle, array, len(pairs), DTYPES[dtype], op, postscale)

    def eager_open(self, *channel_bytes: int) -> int:
        """Opens one channel per size given."""
        return self.table._extensions.eager_open(self.handle, _sizes(channel_bytes), len(channel_bytes))

    def eager_send(self, buf: np.ndarray, peer: int, channel: int = 0) -> int:
        """Starts sending `buf` (kept alive by the caller until eager_wait_sent) to `peer`."""
        return self.table._extensions.eager_send(self.handle, channel, peer, buf.ctypes.data, buf.nbytes)

    def eager_wait_sent(self, peer: int, channel: int = 0) -> int:
        return self.table._extensions.eager_wait_sent(self.handle, channel, peer)

    def eager_receive(self, peer: int, nbytes: int, channel: int = 0) -> tuple[int, bytes]:
        """Waits for `peer`'s oldest unreleased message; returns the status and its first `nbytes` bytes."""
        data = c_void_p()
        rc = self.table._extensions.eager_receive(self.handle, channel, peer, ctypes.byref(data))
        return rc, (ctypes.string_at(data.value, nbytes) if rc == OK else b"")

    def eager_release(self, peer: int, channel: int = 0) -> int:
        return self.table._extensions.eager_release(self.handle, channel, peer)

    def eager_receive_into(self, dst: np.ndarray, peer: int, channel: int = 0) -> int:
        """Takes `peer`'s oldest unreleased message (exactly dst.nbytes long) into `dst` and releases it."""
        return self.table._extensions.eager_receive_into(self.handle, channel, peer, dst.ctypes.data, dst.nbytes)

    def allgatherv(self, send: np.ndarray, recv: np.ndarray, counts: Sequence[int], dtype: str) -> int:
        return self.table.allgatherv(self.handle, send.ctypes.data, recv.ctypes.data, _sizes(counts), DTYPES[dtype])

    def broadcast(self, buf: np.ndarray, dtype: str, root: int) -> int:
        return self.table.broadcast(self.handle, buf.ctypes.data, buf.size, DTYPES[dtype], root)

    def alltoallv(
        self, send: np.ndarray, sendcounts: Sequence[int], recv: np.ndarray, recvcounts: Sequence[int], dtype: str
    ) -> int:
        return self.table.alltoallv(
            self.handle, send.ctypes.data, _sizes(sendcounts), recv.ctypes.data, _sizes(recvcounts), DTYPES[dtype]
        )

    def reducescatter(self, send: np.ndarray, recv: np.ndarray, counts: Sequence[int], dtype: str, op: int) -> int:
        return self.table.reducescatter(
            self.handle, send.ctypes.data, recv.ctypes.data, _sizes(counts), DTYPES[dtype], op
        )

    def barrier(self) -> int:
        return self.table.barrier(self.handle)

    @property
    def transport(self) -> str:
        return self.table._lib.hvd_gloo_transport(self.handle).decode()

    def send(self, buf: np.ndarray, peer: int, tag: int) -> int:
        return self.table.send(self.handle, buf.ctypes.data, buf.nbytes, peer, tag)

    def recv(self, buf: np.ndarray, peer: int, tag: int) -> int:
        return self.table.recv(self.handle, buf.ctypes.data, buf.nbytes, peer, tag)

    def destroy(self) -> None:
        if self.handle:
            self.table.comm_destroy(self.handle)
            self.handle = None


def _sizes(counts: Sequence[int]) -> Any:
    return (c_size_t * len(counts))(*counts)


def create(table: _Table, store: Store, rank: int, size: int, prefix: str, timeout_ms: int) -> Comm:
    """comm_create for one member (collective: every member must call it)."""
    job_ranks = (c_int32 * size)(*range(size))
    config = Config(ctypes.sizeof(Config), rank, size, job_ranks, prefix.encode(), timeout_ms, DEVICE_CPU, -1)
    handle = c_void_p()
    error = ctypes.create_string_buffer(1024)
    rc = table.comm_create(ctypes.byref(config), ctypes.byref(store.struct), ctypes.byref(handle), error, len(error))
    if rc != OK:
        raise RuntimeError(f"comm_create failed ({rc}): {error.value.decode()}")
    return Comm(table, handle.value, rank, size)


def run_members(
    size: int, fn: Callable[[Comm], Any], *, timeout_ms: int = 20000, prefix: str = "t", join_timeout: float = 60.0
) -> list[Any]:
    """Creates a communicator of `size` members (threads) and runs fn(comm) on each; returns results.

    A member's exception is re-raised here; each communicator is destroyed when its fn returns.
    """
    table, store = load(), Store()
    results: list[Any] = [None] * size
    errors: dict[int, BaseException] = {}

    def member(rank: int) -> None:
        comm = None
        try:
            comm = create(table, store, rank, size, prefix, timeout_ms)
            results[rank] = fn(comm)
        except BaseException as error:  # re-raised below with the rank
            errors[rank] = error
        finally:
            if comm is not None:
                comm.destroy()

    threads = [threading.Thread(target=member, args=(r,), daemon=True) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(join_timeout)
    stuck = [r for r, t in enumerate(threads) if t.is_alive()]
    assert not stuck, f"members {stuck} did not finish within {join_timeout} s"
    if errors:
        rank, error = sorted(errors.items())[0]
        raise AssertionError(f"member {rank} failed: {error!r}") from error
    return results
