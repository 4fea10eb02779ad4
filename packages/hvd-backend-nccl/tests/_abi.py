"""Driving the backend library through its C ABI (ctypes), with members as threads of this process.

The backend runs on the fake NCCL (fake_nccl/, built by conftest.py) and hvd-core's simulated
device: each member has its own stream, device buffers are made and read through the device table
(_device.py), and the store is a dict behind a condition variable handed over as an hvd_store_v1
of ctypes callbacks.
"""

from __future__ import annotations

import ctypes
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

from _device import Device

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
DEVICE_CUDA = 2
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
        ("device", c_void_p),
        ("stream", c_void_p),
    ]


class Table(Structure):
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
        ("send", c_void_p),
        ("recv", c_void_p),
    ]


class BufferPair(Structure):
    _fields_ = [("sendbuf", c_void_p), ("recvbuf", c_void_p), ("count", c_size_t)]


class Extensions(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("reserved", c_uint32),
        ("allreduce_buffers", CFUNCTYPE(c_int, c_void_p, POINTER(BufferPair), c_size_t, c_int, c_int, c_double)),
        ("eager_open", c_void_p),
        ("eager_send", c_void_p),
        ("eager_wait_sent", c_void_p),
        ("eager_receive", c_void_p),
        ("eager_release", c_void_p),
        ("eager_receive_into", c_void_p),
        ("async_error", CFUNCTYPE(c_int, c_void_p)),
        ("abort", CFUNCTYPE(c_int, c_void_p)),
    ]


class Backend:
    """The library's two tables, loaded RTLD_LOCAL as the engine loads it."""

    def __init__(self, path: str) -> None:
        import os

        self.lib = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
        self.lib.hvd_backend_v1_get.restype = POINTER(Table)
        self.lib.hvd_backend_ext_v1_get.restype = POINTER(Extensions)
        self.table = self.lib.hvd_backend_v1_get().contents
        self.ext = self.lib.hvd_backend_ext_v1_get().contents


class Store:
    """An hvd_store_v1 over a dict (the engine's in-memory store, in Python)."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self._cv = threading.Condition()
        self._handed_out: dict[int, ctypes.Array] = {}
        self._callbacks = (_SET(self._set), _GET(self._get), _RELEASE(self._release))
        self.struct = _StoreStruct(None, *self._callbacks)

    def _set(self, ctx: Any, key: bytes, value: int, length: int) -> int:
        with self._cv:
            self.data[key] = ctypes.string_at(value, length) if length else b""
            self._cv.notify_all()
        return OK

    def _get(self, ctx: Any, key: bytes, value: Any, length: Any, timeout_ms: int) -> int:
        with self._cv:
            if not self._cv.wait_for(lambda: key in self.data, timeout_ms / 1000.0):
                return TIMEOUT
            data = self.data[key]
        buf = ctypes.create_string_buffer(data, max(1, len(data)))
        address = ctypes.addressof(buf)
        with self._cv:
            self._handed_out[address] = buf
        value[0] = address
        length[0] = len(data)
        return OK

    def _release(self, ctx: Any, value: int) -> None:
        with self._cv:
            self._handed_out.pop(value, None)


def _sizes(counts: Sequence[int]) -> Any:
    return (c_size_t * max(1, len(counts)))(*counts)


class Comm:
    """One member's communicator on its own stream; collectives take device addresses."""

    def __init__(self, backend: Backend, device: Device, handle: int, rank: int, size: int, stream: int) -> None:
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
        return self.table.allgatherv(self.handle, send, recv, _sizes(counts), DTYPES[dtype])

    def broadcast(self, buf: int, count: int, dtype: str, root: int) -> int:
        return self.table.broadcast(self.handle, buf, count, DTYPES[dtype], root)

    def alltoallv(self, send: int, sendcounts: Sequence[int], recv: int, recvcounts: Sequence[int], dtype: str) -> int:
        return self.table.alltoallv(self.handle, send, _sizes(sendcounts), recv, _sizes(recvcounts), DTYPES[dtype])

    def reducescatter(self, send: int, recv: int, counts: Sequence[int], dtype: str, op: int) -> int:
        return self.table.reducescatter(self.handle, send, recv, _sizes(counts), DTYPES[dtype], op)

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
    backend: Backend,
    device: Device,
    store: Store,
    rank: int,
    job_ranks: Sequence[int],
    prefix: str,
    timeout_ms: int,
    stream: int,
) -> Comm:
    """comm_create for one member (the NCCL communicator itself comes at the first collective)."""
    size = len(job_ranks)
    ranks = (c_int32 * size)(*job_ranks)
    config = Config(
        ctypes.sizeof(Config), rank, size, ranks, prefix.encode(), timeout_ms, DEVICE_CUDA, 0, device.address, stream
    )
    handle = c_void_p()
    error = ctypes.create_string_buffer(1024)
    rc = backend.table.comm_create(
        ctypes.byref(config), ctypes.byref(store.struct), ctypes.byref(handle), error, len(error)
    )
    if rc != OK:
        raise RuntimeError(f"comm_create failed ({rc}): {error.value.decode()}")
    return Comm(backend, device, int(handle.value or 0), rank, size, stream)


def run_members(
    backend: Backend,
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
    store = store or Store()
    results: list[Any] = [None] * size
    errors: dict[int, BaseException] = {}

    def member(rank: int) -> None:
        stream = device.stream()
        comm = None
        try:
            comm = create(backend, device, store, rank, list(range(size)), prefix, timeout_ms, stream)
            results[rank] = fn(comm)
        except BaseException as error:  # re-raised below with the rank
            errors[rank] = error
        finally:
            if comm is not None:
                comm.destroy()
            device.destroy_stream(stream)

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
