"""The library through its C ABI, driven by a C program on 3 ranks (abi_driver.c says what it checks)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import _mpirun
from horovod.backends.mpi import library_path, mpi_library
from horovod.common import get_include


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> str:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("needs a C compiler")
    out = tmp_path_factory.mktemp("abi") / "abi_driver"
    source = Path(__file__).with_name("abi_driver.c")
    subprocess.run(
        [compiler, "-std=c11", "-Wall", "-Werror", "-I", get_include(), str(source), "-o", str(out), "-ldl", "-lm"],
        check=True,
        timeout=120,
    )
    return str(out)


def test_what_the_engine_never_asks(driver: str) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        _mpirun.command(3, [driver, library_path(), mpi_library.loaded()]),
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert sorted(line for line in run.stdout.splitlines() if line.endswith(": ok")) == [
        "rank 0: ok",
        "rank 1: ok",
        "rank 2: ok",
    ], output
