"""The device layer for tests of device-capable backends, which must not import hvd-core's private
extension themselves (tests/test_package_boundaries.py)."""

from __future__ import annotations

from typing import Any

import numpy as np


def device_table_capsule(kind: str = "simulated") -> Any:
    """The hvd_device_v1 table of ``kind`` ("simulated" or "cuda"), in a PyCapsule named
    "horovod.hvd_device_v1": what the engine hands a device communicator (horovod/hvd_device.h).
    Raises ValueError naming what is missing when that device cannot be used."""
    from horovod.common import _core

    return _core.Device(kind).capsule()


def cuda_runtime_works() -> bool:
    """Whether the CUDA device layer can be used here (a GPU, its driver and libcudart): tests
    whose outcome depends on it (CUDA tensors staged or refused) ask first."""
    from horovod.common import _core

    try:
        _core.Device("cuda")
    except ValueError:
        return False
    return True


def simulated_device_races(clear: bool = True) -> list[str]:
    """The unordered accesses the simulated device has found (see csrc/device/simulated_device.h),
    forgotten afterwards unless ``clear`` is False."""
    from horovod.common import _core

    races = list(_core.simulated_device_state()["races"])
    if clear:
        _core.simulated_device_clear_races()
    return races


class DeviceTensors:
    """A rank's view of a device in tests: a stream of its own, and arrays put in device memory.

    Each array is written on that stream after a stretch of other work (``busy_first`` seconds on the
    simulated device), so that an engine that did not wait for the tensor's ready event reads it
    unwritten; results are read back on the same stream, after the handle's completion event.
    """

    def __init__(self, kind: str = "simulated", device_id: int = 0) -> None:
        from horovod.common import _core

        self.device = _core.Device(kind)
        self.device_id = device_id
        self.stream = self.device.create_stream(device_id)
        self.allocations: list[int] = []

    def put(self, array: np.ndarray, busy_first: float = 0.02) -> int:
        """Device memory holding ``array``, written on this rank's stream after other work."""
        address = self.empty(array.nbytes)
        self.device.delay(self.stream, busy_first)
        self.device.upload(address, np.ascontiguousarray(array).tobytes(), self.stream)
        return address

    def empty(self, nbytes: int) -> int:
        address = self.device.alloc(self.device_id, max(nbytes, 1))
        self.allocations.append(address)
        return address

    def get(self, address: int, like: np.ndarray) -> np.ndarray:
        data = self.device.download(address, like.nbytes, self.stream)
        return np.frombuffer(data, dtype=like.dtype).reshape(like.shape)

    def submit(self, op_type: int | str, name: str, address: int, array: np.ndarray, **kw: Any) -> Any:
        """Submits an operation (its code, or its name: "allreduce") on ``array``'s device copy at
        ``address`` to this thread's engine, from this rank's stream (keywords as
        ``_core.Engine.enqueue`` takes them); its handle."""
        from horovod.common import _core, dtypes, state

        if isinstance(op_type, str):
            op_type = getattr(_core, f"OP_{op_type.upper()}")
        return state.context().engine.enqueue(
            op_type,
            name,
            (address, array.nbytes),
            dtypes.code_of(array.dtype),
            list(array.shape),
            device_kind=_core.DEVICE_CUDA,
            device_id=self.device_id,
            stream=self.stream,
            **kw,
        )

    def close(self, synchronize: bool = True) -> None:
        """Frees what was put; ``synchronize=False`` on a device a race made fail every call."""
        if synchronize:
            self.device.synchronize(self.stream)
        for address in self.allocations:
            self.device.free(address)
        self.device.destroy_stream(self.stream)
