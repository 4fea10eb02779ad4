"""The real libnccl.so.2 of the nvidia-nccl-cu13 wheel, on a machine without a GPU or a driver.

Loading, the version check and ncclGetUniqueId work without a GPU; creating a communicator cannot,
and must end in an error naming what is missing, never a crash. The backend loads one NCCL per
process, so each test runs in a process of its own (with a hard timeout).
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _device import require_device_table

HERE = Path(__file__).resolve().parent
WHEEL_VERSION = "2.30.7"  # the nvidia-nccl-cu13 pinned in pyproject.toml's test extra


def run(code: str, env: dict[str, str] | None = None) -> dict:
    """Runs ``code`` in a fresh interpreter (tests/ importable) and returns the JSON it prints last."""
    environment = {**os.environ, "PYTHONPATH": str(HERE), **(env or {})}
    environment.pop("HOROVOD_NCCL_LIBRARY", None) if env is None or "HOROVOD_NCCL_LIBRARY" not in env else None
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, env=environment
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])


PRELUDE = """
import ctypes, json, os, sys
from horovod.backends.nccl import backend_library, library_path, nccl_library
"""


def test_the_wheel_s_nccl_is_found_loaded_and_its_version_read() -> None:
    out = run(PRELUDE + "print(json.dumps([library_path(), nccl_library.loaded(backend_library())]))")
    _, (version, origin) = out
    assert version == WHEEL_VERSION
    assert origin.endswith(os.path.join("nvidia", "nccl", "lib", "libnccl.so.2")), origin


def test_a_copy_already_in_the_process_is_preferred() -> None:
    out = run(
        PRELUDE
        + """
first = nccl_library.candidates()[0]
ctypes.CDLL(first, mode=os.RTLD_LOCAL)  # as torch loads its own
print(json.dumps([nccl_library.describe(), nccl_library.load(backend_library(), search=[])]))
"""
    )
    described, (version, origin) = out
    assert described == f"NCCL {WHEEL_VERSION}, already loaded"
    assert [version, origin] == [WHEEL_VERSION, "libnccl.so.2 (already loaded)"]


@pytest.mark.parametrize(
    ("named", "expected"),
    [
        ("/nonexistent/libnccl.so.2", "/nonexistent/libnccl.so.2: cannot open shared object file"),
        ("libc.so.6", "libc.so.6 is not NCCL (it has no ncclGetVersion)"),
    ],
)
def test_a_named_library_that_is_not_usable_is_an_error_naming_it(named: str, expected: str) -> None:
    out = run(
        PRELUDE
        + """
try:
    library_path()
    print(json.dumps("loaded"))
except OSError as error:
    print(json.dumps(str(error)))
""",
        env={"HOROVOD_NCCL_LIBRARY": named},
    )
    assert out.startswith("nccl: could not load the NCCL library named by HOROVOD_NCCL_LIBRARY: "), out
    assert expected in out


def test_no_nccl_at_all_says_what_to_install() -> None:
    out = run(
        PRELUDE
        + """
try:
    nccl_library.load(backend_library(), search=["/nonexistent/nvidia/nccl/lib/libnccl.so.2"])
    print(json.dumps("loaded"))
except OSError as error:
    print(json.dumps(str(error)))
""",
        env={"LD_LIBRARY_PATH": ""},
    )
    assert out.startswith("nccl: no usable NCCL library (/nonexistent/nvidia/nccl/lib/libnccl.so.2: cannot open")
    assert "pip install nvidia-nccl-cu13 (CUDA 13) or nvidia-nccl-cu12 (CUDA 12)" in out


def _driver_present() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_driver_present(), reason="a GPU driver is present: NCCL would run on simulated memory")
def test_without_a_gpu_the_first_collective_fails_clearly_and_nothing_crashes() -> None:
    """ncclGetUniqueId works; the communicator's creation fails with NCCL's own words, named."""
    require_device_table()
    out = run(
        """
import json
import numpy as np
import _abi
from _device import Device
from horovod.backends.nccl import library_path

device = Device("simulated")  # set_device works; NCCL then finds no GPU itself
backend = _abi.BackendLibrary(library_path())

def member(comm):
    buf = comm.upload(np.ones(4, np.float32))
    rc = comm.allreduce(buf, buf, 4, "float32", _abi.SUM)
    again = comm.barrier()
    return [rc, comm.last_error, again, comm.async_error()]

print(json.dumps(_abi.run_members(backend, device, 1, member, timeout_ms=5000)[0]))
"""
    )
    rc, message, again, polled = out
    assert rc == again == polled == 5, out  # HVD_ERR_INTERNAL, and the comm stays failed
    assert message.startswith(f"nccl allreduce (rank 0 of 1, NCCL {WHEEL_VERSION}): creating the NCCL communicator: ")
    assert "ncclCommInitRankConfig failed: unhandled cuda error" in message, message
    assert "CUDA driver version is insufficient" in message, message  # NCCL's last error: no driver


def test_the_version_reported_without_loading_nccl() -> None:
    out = run(
        """
import json
import horovod.common as hvd
from horovod.common.plugin_api import get_plugin_manager
from horovod.backends.nccl import nccl_library
spec = get_plugin_manager().backends()["nccl"]
print(json.dumps([spec.version, list(spec.device_kinds), hvd.nccl_built(), nccl_library.describe()]))
"""
    )
    from horovod.backends.nccl import __version__

    version, kinds, built, described = out
    assert described == f"NCCL {WHEEL_VERSION} from nvidia-nccl-cu13"
    assert version == f"{__version__} ({described})" and kinds == ["cuda"] and built is True
