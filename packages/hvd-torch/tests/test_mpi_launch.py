"""A torch training script started by plain ``mpirun`` (no horovodrun: rank and size from MPI, on
hvd-backend-mpi) ends with the same weights as under ``horovodrun --gloo``, and under
``horovodrun --mpi``. Needs hvd-backend-mpi and the mpich wheel in this environment.

``mpi_train_weights.py`` is seeded throughout and runs 2 ranks: a sum of two numbers does not
depend on the order a backend adds them in, so the weights must agree bit for bit.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

from horovod.runner import mpi_impl

SCRIPT = pathlib.Path(__file__).with_name("mpi_train_weights.py")
TIMEOUT_S = 240
pytestmark = pytest.mark.timeout(3 * TIMEOUT_S + 60)
_LINE = re.compile(r"weights rank (\d+)/(\d+) mpi (True|False) loss \S+ sha256 ([0-9a-f]{64})")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env.pop("PYTHONUNBUFFERED", None)  # MPICH prefixes each write: keep a print in one write
    env["OMP_NUM_THREADS"] = "1"
    return env


def _digests(argv: list[str]) -> list[tuple[int, bool, str]]:
    """(rank, whether it ran on MPI, weights digest) of each rank of the job ``argv``."""
    done = subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    found = sorted((int(m.group(1)), m.group(3) == "True", m.group(4)) for m in _LINE.finditer(done.stdout))
    assert [rank for rank, _, _ in found] == [0, 1], done.stdout
    return found


def test_plain_mpirun_gives_the_weights_of_the_gloo_run() -> None:
    launcher = mpi_impl.find_launcher(os.environ)
    assert launcher is not None, "no mpirun beside this Python or on PATH: pip install mpich"
    impl = mpi_impl.detect(launcher, os.environ)
    as_root = ["--allow-run-as-root"] if impl.flavour == mpi_impl.OPENMPI and os.geteuid() == 0 else []
    horovodrun = [sys.executable, "-m", "horovod.runner.launch"]
    python = [sys.executable, str(SCRIPT)]

    mpirun = _digests([launcher, *as_root, "-np", "2", *python])
    gloo = _digests([*horovodrun, "--gloo", "-np", "2", *python])
    via_mpi = _digests([*horovodrun, "--mpi", "-np", "2", *python])

    assert [on_mpi for _, on_mpi, _ in mpirun + gloo + via_mpi] == [True, True, False, False, True, True]
    digests = {digest for _, _, digest in mpirun + gloo + via_mpi}
    assert len(digests) == 1, (mpirun, gloo, via_mpi)
