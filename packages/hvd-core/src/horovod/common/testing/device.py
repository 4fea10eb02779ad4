"""The device layer for tests of device-capable backends, which must not import hvd-core's private
extension themselves (tests/test_package_boundaries.py)."""

from __future__ import annotations

from typing import Any


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
