"""hvd-core's device table (horovod/hvd_device.h) from Python, through ctypes on its capsule.

Only the C table is used (the stable contract): streams, device memory, copies to and from the
host. The simulated device runs each stream's work in order on a thread of its own and keeps
device memory unreadable outside that work, so a test that forgets an ordering fails.
"""

from __future__ import annotations

import ctypes
from ctypes import CFUNCTYPE, POINTER, Structure, c_char_p, c_int, c_int32, c_size_t, c_uint32, c_void_p
from typing import Any

import numpy as np
import pytest

OK = 0
HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_TO_DEVICE = 1, 2, 3
CAPSULE_NAME = b"horovod.hvd_device_v1"

_HOST_FN = CFUNCTYPE(None, c_void_p)


class DeviceTable(Structure):
    _fields_ = [
        ("abi_version", c_uint32),
        ("struct_size", c_uint32),
        ("name", c_char_p),
        ("device_kind", c_uint32),
        ("reserved", c_uint32),
        ("last_error", CFUNCTYPE(c_char_p)),
        ("device_count", CFUNCTYPE(c_int, POINTER(c_int32))),
        ("set_device", CFUNCTYPE(c_int, c_int32)),
        ("stream_create", CFUNCTYPE(c_int, c_int32, POINTER(c_void_p))),
        ("stream_destroy", CFUNCTYPE(c_int, c_void_p)),
        ("stream_synchronize", CFUNCTYPE(c_int, c_void_p)),
        ("stream_wait_event", CFUNCTYPE(c_int, c_void_p, c_void_p)),
        ("event_create", CFUNCTYPE(c_int, c_int32, POINTER(c_void_p))),
        ("event_destroy", CFUNCTYPE(c_int, c_void_p)),
        ("event_record", CFUNCTYPE(c_int, c_void_p, c_void_p)),
        ("event_query", CFUNCTYPE(c_int, c_void_p, POINTER(c_int))),
        ("event_synchronize", CFUNCTYPE(c_int, c_void_p)),
        ("memcpy_async", CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t, c_int, c_void_p)),
        ("memset_async", CFUNCTYPE(c_int, c_void_p, c_int, c_size_t, c_void_p)),
        ("launch_host_fn", CFUNCTYPE(c_int, c_void_p, _HOST_FN, c_void_p)),
        ("device_alloc", CFUNCTYPE(c_int, c_int32, c_size_t, POINTER(c_void_p))),
        ("device_free", CFUNCTYPE(c_int, c_void_p)),
        ("host_alloc", CFUNCTYPE(c_int, c_size_t, POINTER(c_void_p))),
        ("host_free", CFUNCTYPE(c_int, c_void_p)),
    ]


def require_device_table() -> None:
    """Skips the calling test when this hvd-core's test kit has no device table (a test that runs
    its work in a child process asks here first, where a skip is a skip)."""
    from horovod.common import testing

    if not hasattr(testing, "device_table_capsule"):
        pytest.skip("this hvd-core's test kit has no device table (horovod.common.testing.device_table_capsule)")


def _capsule(kind: str) -> Any:
    """hvd-core's capsule of the device table ``kind`` ("simulated", "cuda"), from its test kit (the
    one part of hvd-core besides its façades that other packages' tests may use), or a skip naming
    what this hvd-core lacks."""
    require_device_table()
    from horovod.common import testing

    return testing.device_table_capsule(kind)


def capsule_pointer(capsule: Any) -> int:
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = c_void_p
    get.argtypes = [ctypes.py_object, c_char_p]
    return int(get(capsule, CAPSULE_NAME))


class Device:
    """One device table, with the helpers the tests use. Every call is checked."""

    def __init__(self, kind: str = "simulated") -> None:
        self.address = capsule_pointer(_capsule(kind))
        self.table = DeviceTable.from_address(self.address)
        assert self.table.abi_version == 1 and self.table.struct_size >= ctypes.sizeof(DeviceTable)

    def check(self, rc: int, what: str) -> None:
        if rc != OK:
            raise RuntimeError(f"{self.table.name.decode()} device: {what} failed: {self.table.last_error().decode()}")

    def stream(self, device_id: int = 0) -> int:
        out = c_void_p()
        self.check(self.table.stream_create(device_id, ctypes.byref(out)), "stream_create")
        return int(out.value or 0)

    def destroy_stream(self, stream: int) -> None:
        self.check(self.table.stream_destroy(stream), "stream_destroy")

    def synchronize(self, stream: int) -> None:
        self.check(self.table.stream_synchronize(stream), "stream_synchronize")

    def alloc(self, nbytes: int, device_id: int = 0) -> int:
        out = c_void_p()
        self.check(self.table.device_alloc(device_id, max(1, nbytes), ctypes.byref(out)), "device_alloc")
        return int(out.value or 0)

    def free(self, address: int) -> None:
        self.check(self.table.device_free(address), "device_free")

    def upload(self, array: np.ndarray, stream: int, device_id: int = 0) -> int:
        """A new device buffer holding ``array`` once ``stream`` has run the copy (queued on it)."""
        array = np.ascontiguousarray(array)
        address = self.alloc(array.nbytes, device_id)
        if array.nbytes:
            self.check(
                self.table.memcpy_async(address, array.ctypes.data, array.nbytes, HOST_TO_DEVICE, stream), "upload"
            )
            self.synchronize(stream)  # `array` may go once the copy ran
        return address

    def download(self, address: int, like: np.ndarray, stream: int) -> np.ndarray:
        """The device buffer's contents after the work queued on ``stream`` so far."""
        out = np.empty_like(like)
        if out.nbytes:
            self.check(
                self.table.memcpy_async(out.ctypes.data, address, out.nbytes, DEVICE_TO_HOST, stream), "download"
            )
        self.synchronize(stream)
        return out
