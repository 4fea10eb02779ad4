"""Older NCCL releases (the fake, reporting another version): what each can do inside NCCL, and
what is left to the engine or refused. The version is read when NCCL is loaded, once per process,
so each release runs in a process of its own (with a hard timeout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from _device import require_device_table

HERE = Path(__file__).resolve().parent

WORKER = """
import json, os
import numpy as np
import _abi
from _device import Device
from conftest import Fake
from horovod.backends.nccl import backend_library, nccl_library

path = backend_library()
try:
    nccl_library.load(path, explicit=os.environ["FAKE_NCCL_PATH"])
except OSError as error:
    print(json.dumps({"load": str(error)}))
    raise SystemExit(0)
device = Device("simulated")
fake = Fake(os.environ["FAKE_NCCL_PATH"])
fake.lib.fake_nccl_attach(device.address)
backend = _abi.BackendLibrary(path)

def member(comm):
    buf = comm.upload(np.ones(4, np.float32))
    average = comm.allreduce_buffers([(buf, buf, 4)], "float32", _abi.SUM, 0.5)
    factor = comm.allreduce_buffers([(buf, buf, 4)], "float32", _abi.SUM, 0.25)
    half = comm.upload(np.ones(4, np.uint16))
    bfloat16 = comm.allreduce(half, half, 4, "bfloat16", _abi.SUM)
    message = comm.last_error
    return [average, factor, bfloat16, message, comm.broadcast(buf, 4, "float32", 0)]

results = _abi.run_members(backend, device, 2, member)
print(json.dumps({"results": results[0], "log": fake.log()}))
"""


def run_on(version: int, fake_nccl_path: Path) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": str(HERE),
        "FAKE_NCCL_VERSION": str(version),
        "FAKE_NCCL_PATH": str(fake_nccl_path),
    }
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(WORKER)], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_nccl_2_10_averages_but_leaves_other_factors_to_the_engine(fake_nccl_path: Path) -> None:
    require_device_table()
    out = run_on(21003, fake_nccl_path)
    average, factor, bfloat16, _, broadcast = out["results"]
    assert (average, factor, bfloat16, broadcast) == (0, 2, 0, 0)  # OK, UNSUPPORTED (declined), OK, OK
    assert any("op=avg" in line for line in out["log"])
    assert not any("PreMulSum" in line for line in out["log"])
    assert "ncclCommInitRank rank=0 nranks=2 blocking" in out["log"]  # non-blocking ones came in 2.14


def test_nccl_2_9_scales_nothing_reduces_no_bfloat16_and_creates_blocking(fake_nccl_path: Path) -> None:
    require_device_table()
    out = run_on(20904, fake_nccl_path)
    average, factor, bfloat16, message, broadcast = out["results"]
    assert (average, factor, bfloat16, broadcast) == (2, 2, 2, 0)
    assert message == (
        "nccl allreduce (rank 0 of 2, NCCL 2.9.4): NCCL 2.9.4 cannot reduce bfloat16 tensors "
        "(int16 has no NCCL type; bfloat16 needs NCCL 2.10)"
    )
    # Nothing was queued before the broadcast, which made a blocking communicator.
    assert sorted(line for line in out["log"] if line.startswith("ncclCommInit")) == [
        "ncclCommInitRank rank=0 nranks=2 blocking",
        "ncclCommInitRank rank=1 nranks=2 blocking",
    ]


def test_nccl_before_2_7_is_refused_naming_its_version(fake_nccl_path: Path) -> None:
    out = run_on(2604, fake_nccl_path)
    assert out["load"] == (
        f"nccl: could not load the NCCL library named by HOROVOD_NCCL_LIBRARY: NCCL 2.6.4 ({fake_nccl_path}) "
        "is too old: hvd-backend-nccl needs NCCL 2.7.0 or later (ncclSend/ncclRecv)"
    )
