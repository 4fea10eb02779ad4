"""The backend C ABI (horovod/hvd_backend.h) in ctypes, for tests that drive a backend library
directly, without the engine: its status codes and numbering, the structures and function tables,
the library's tables loaded as the engine loads them, and a key-value store over a dict.

A backend's own tests add what concerns it (how a member's buffers are made, the collectives as
methods of a communicator) on top of these.
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
DEVICE_CPU, DEVICE_CUDA = 1, 2
CAP_SEND_RECV, CAP_IN_PROCESS_ONLY, CAP_LOW_PRECISION = 1, 2, 4

_SET = CFUNCTYPE(c_int, c_void_p, c_char_p, c_void_p, c_size_t)
_GET = CFUNCTYPE(c_int, c_void_p, c_char_p, POINTER(c_void_p), POINTER(c_size_t), c_int64)
_RELEASE = CFUNCTYPE(None, c_void_p, c_void_p)


class StoreStruct(Structure):
    _fields_ = [("ctx", c_void_p), ("set", _SET), ("get", _GET), ("release", _RELEASE)]


class Config(Structure):
    """hvd_comm_config_v1, with the members appended for device communicators."""

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
    """hvd_backend_v1."""

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
            CFUNCTYPE(c_int, POINTER(Config), POINTER(StoreStruct), POINTER(c_void_p), c_char_p, c_size_t),
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


class BufferPair(Structure):
    _fields_ = [("sendbuf", c_void_p), ("recvbuf", c_void_p), ("count", c_size_t)]


class Extensions(Structure):
    """hvd_backend_ext_v1, every member appended so far (read one only where struct_size covers it)."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("reserved", c_uint32),
        ("allreduce_buffers", CFUNCTYPE(c_int, c_void_p, POINTER(BufferPair), c_size_t, c_int, c_int, c_double)),
        ("eager_open", CFUNCTYPE(c_int, c_void_p, POINTER(c_size_t), c_int32)),
        ("eager_send", CFUNCTYPE(c_int, c_void_p, c_int32, c_int32, c_void_p, c_size_t)),
        ("eager_wait_sent", CFUNCTYPE(c_int, c_void_p, c_int32, c_int32)),
        ("eager_receive", CFUNCTYPE(c_int, c_void_p, c_int32, c_int32, POINTER(c_void_p))),
        ("eager_release", CFUNCTYPE(c_int, c_void_p, c_int32, c_int32)),
        ("eager_receive_into", CFUNCTYPE(c_int, c_void_p, c_int32, c_int32, c_void_p, c_size_t)),
        ("async_error", CFUNCTYPE(c_int, c_void_p)),
        ("abort", CFUNCTYPE(c_int, c_void_p)),
    ]


class BackendLibrary:
    """A backend library's two tables, loaded RTLD_LOCAL as the engine loads it. The library stays
    loaded as long as this object."""

    def __init__(self, path: str) -> None:
        self.lib = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
        self.lib.hvd_backend_v1_get.restype = POINTER(Table)
        self.lib.hvd_backend_ext_v1_get.restype = POINTER(Extensions)
        self.table: Table = self.lib.hvd_backend_v1_get().contents
        self.ext: Extensions = self.lib.hvd_backend_ext_v1_get().contents


class Store:
    """An hvd_store_v1 over a dict (the engine's in-memory store, in Python); ``struct`` is what a
    backend is handed. Safe to call from every member's thread."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self._cv = threading.Condition()
        self._handed_out: dict[int, ctypes.Array[ctypes.c_char]] = {}
        self._callbacks = (_SET(self._set), _GET(self._get), _RELEASE(self._release))
        self.struct = StoreStruct(None, *self._callbacks)

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
            self._handed_out[address] = buf
        value[0] = address
        length[0] = len(data)
        return OK

    def _release(self, ctx: Any, value: int) -> None:
        with self._cv:
            self._handed_out.pop(value, None)


def size_array(counts: Sequence[int]) -> Any:
    """A C array of size_t holding ``counts`` (never of length 0)."""
    return (c_size_t * max(1, len(counts)))(*counts)


def comm_create(
    table: Table,
    store: Store,
    rank: int,
    job_ranks: Sequence[int],
    prefix: str,
    timeout_ms: int,
    *,
    device_kind: int = DEVICE_CPU,
    device_id: int = -1,
    device: int | None = None,
    stream: int | None = None,
) -> int:
    """comm_create for member ``rank`` of ``job_ranks`` (collective: every member must call it),
    on the CPU or, with ``device_kind`` and the rest given, on a device. Returns the communicator's
    handle; a failure raises RuntimeError with the backend's message."""
    ranks = (c_int32 * len(job_ranks))(*job_ranks)
    config = Config(
        ctypes.sizeof(Config),
        rank,
        len(job_ranks),
        ranks,
        prefix.encode(),
        timeout_ms,
        device_kind,
        device_id,
        device,
        stream,
    )
    handle = c_void_p()
    error = ctypes.create_string_buffer(1024)
    rc = table.comm_create(ctypes.byref(config), ctypes.byref(store.struct), ctypes.byref(handle), error, len(error))
    if rc != OK:
        raise RuntimeError(f"comm_create failed ({rc}): {error.value.decode()}")
    return int(handle.value or 0)


def run_threads(size: int, member: Callable[[int], Any], join_timeout: float = 60.0) -> list[Any]:
    """Runs ``member(rank)`` for each of ``size`` members on threads of its own and returns their
    results in rank order. A member still running after ``join_timeout`` seconds fails the call, and
    the first member's exception (by rank) is re-raised, naming it."""
    results: list[Any] = [None] * size
    errors: dict[int, BaseException] = {}

    def run(rank: int) -> None:
        try:
            results[rank] = member(rank)
        except BaseException as error:  # re-raised below with the rank
            errors[rank] = error

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(size)]
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
