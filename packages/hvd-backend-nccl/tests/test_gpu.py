"""The real NCCL on a real GPU (HVD_TEST_DEVICE=cuda: ./dev gpu-check runs these): one member, as
NCCL allows one rank per GPU in a communicator. Every collective, the scaling inside NCCL, polling
that reports nothing once the work is done, and abort. In a process of its own (the real libnccl,
and hvd-core's CUDA device table), with a hard timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _device import require_device_table

HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.skipif(
    os.environ.get("HVD_TEST_DEVICE") != "cuda", reason="needs a GPU: HVD_TEST_DEVICE=cuda (./dev gpu-check)"
)

WORKER = """
import json, os, time
import numpy as np
import _abi
from _device import Device
from horovod.backends.nccl import backend_library, library_path, nccl_library

device = Device(os.environ.get("HVD_GPU_TEST_DEVICE", "cuda"))  # another only to try the test itself
backend = _abi.BackendLibrary(library_path())
report = {"nccl": nccl_library.loaded(backend_library())}

def check(name, ok, detail=""):
    report[name] = [bool(ok), str(detail)]

def member(comm):
    x = np.arange(1, 9, dtype=np.float32)
    buf = comm.upload(x)
    check("allreduce", comm.allreduce(buf, buf, 8, "float32", _abi.SUM) == _abi.OK, comm.last_error)
    check("allreduce result", np.array_equal(comm.download(buf, x), x))
    for name, scale in (("average", 1.0), ("premulsum", 0.5)):
        rc = comm.allreduce_buffers([(buf, buf, 8)], "float32", _abi.SUM, scale)
        check(name, rc == _abi.OK, comm.last_error)
    check("scaled result", np.allclose(comm.download(buf, x), x * 0.5))
    half = comm.upload(x.astype(np.float16))
    check("float16", comm.allreduce(half, half, 8, "float16", _abi.MAX) == _abi.OK, comm.last_error)
    out = comm.upload(np.zeros(8, np.float32))
    check("allgather", comm.allgatherv(buf, out, [8], "float32") == _abi.OK, comm.last_error)
    check("allgather result", np.allclose(comm.download(out, x), x * 0.5))
    check("broadcast", comm.broadcast(buf, 8, "float32", 0) == _abi.OK, comm.last_error)
    check("alltoall", comm.alltoallv(buf, [8], out, [8], "float32") == _abi.OK, comm.last_error)
    check("reducescatter", comm.reducescatter(buf, out, [8], "float32", _abi.SUM) == _abi.OK, comm.last_error)
    check("barrier", comm.barrier() == _abi.OK, comm.last_error)
    device.synchronize(comm.stream)
    time.sleep(0.1)
    check("polled after completion", comm.async_error() == _abi.OK, comm.last_error)
    check("abort", comm.abort() == _abi.OK)
    device.synchronize(comm.stream)
    rc = comm.allreduce(buf, buf, 8, "float32", _abi.SUM)
    check("fails after abort", rc != _abi.OK and "aborted" in comm.last_error, comm.last_error)

_abi.run_members(backend, device, 1, member, timeout_ms=60000)
print(json.dumps(report))
"""


def test_every_collective_polling_and_abort_on_one_gpu() -> None:
    require_device_table()
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(WORKER)], capture_output=True, text=True, timeout=240, env=env
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps(report, indent=1))  # in the check's log: which NCCL, and each step
    failed = {name: detail for name, (ok, detail) in ((k, v) for k, v in report.items() if k != "nccl") if not ok}
    assert not failed, failed
