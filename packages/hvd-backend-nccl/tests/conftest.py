"""Shared by this package's tests: the fake NCCL built once per session, the backend loaded on it,
and hvd-core's simulated device attached to both.

The backend loads one NCCL per process, so every test in this process runs on the fake; the tests of
the real libnccl (test_real_nccl.py) and of other NCCL releases run in processes of their own.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import _abi
from _device import Device

HERE = Path(__file__).resolve().parent
# Each piece of the simulated device's work is delayed by a random 0..100 µs, shuffling how the
# members' streams interleave (read when the device is first used, in this process or a child).
os.environ.setdefault("HOROVOD_SIMULATED_DEVICE_DELAY_US", "100")
FAKE_SOURCES = sorted((HERE / "fake_nccl").glob("*.cc"))


def build_fake_nccl(out_dir: Path) -> Path:
    """Compiles the fake NCCL (fake_nccl/) into ``out_dir``; returns the library's path."""
    from horovod.common import get_include

    compiler = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
    assert compiler, "the fake NCCL is built with a C++ compiler (c++ or $CXX), and there is none"
    out = out_dir / "libfake_nccl.so"
    command = [compiler, "-std=c++17", "-O1", "-g", "-fPIC", "-shared", "-fvisibility=hidden", "-Wall", "-Werror"]
    command += ["-I", get_include(), "-I", str(HERE / "fake_nccl"), *map(str, FAKE_SOURCES), "-o", str(out)]
    subprocess.run(command, check=True, timeout=300)
    return out


class Fake:
    """The fake NCCL's control functions (fake_nccl/comms.cc), on the very library the backend loaded."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lib = ctypes.CDLL(str(path), mode=os.RTLD_LOCAL | os.RTLD_NOW)
        self.lib.fake_nccl_log.restype = ctypes.c_char_p
        self.lib.fake_nccl_fail_next.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        self.lib.fake_nccl_attach.argtypes = [ctypes.c_void_p]

    def log(self) -> list[str]:
        """The calls the backend made since the last call of this."""
        return [line for line in self.lib.fake_nccl_log().decode().splitlines() if line]

    def fail_next(self, rank: int, call: str, result: int) -> None:
        self.lib.fake_nccl_fail_next(rank, call.encode(), result)

    def set_async_error(self, rank: int, result: int) -> None:
        self.lib.fake_nccl_set_async_error(rank, result)

    def live_comms(self) -> int:
        return int(self.lib.fake_nccl_live_comms())


@pytest.fixture(scope="session")
def fake_nccl_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fake_nccl(tmp_path_factory.mktemp("fake_nccl"))


@pytest.fixture(scope="session")
def device() -> Device:
    return Device("simulated")


@pytest.fixture(scope="session")
def loaded(fake_nccl_path: Path, device: Device) -> tuple[_abi.BackendLibrary, Fake]:
    from horovod.backends.nccl import backend_library, nccl_library

    path = backend_library()
    version, origin = nccl_library.load(path, explicit=str(fake_nccl_path))
    assert (version, origin) == ("2.30.7", str(fake_nccl_path))
    fake = Fake(fake_nccl_path)
    fake.lib.fake_nccl_attach(device.address)
    return _abi.BackendLibrary(path), fake


@pytest.fixture
def backend(loaded: tuple[_abi.BackendLibrary, Fake]) -> _abi.BackendLibrary:
    return loaded[0]


@pytest.fixture
def fake(loaded: tuple[_abi.BackendLibrary, Fake]) -> Iterator[Fake]:
    """The fake, its log emptied before the test and its injected errors cleared after it."""
    fake = loaded[1]
    fake.log()
    yield fake
    for rank in range(8):
        fake.set_async_error(rank, 0)
