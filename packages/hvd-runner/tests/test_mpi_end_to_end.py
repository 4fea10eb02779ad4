"""horovodrun --mpi with real Horovod ranks: hvd-backend-mpi under the MPICH wheel (both in this
package's test environment: ``[tool.hvd] test-requires-local`` and the ``test`` extra).

The ranks call hvd.init() and learn rank and size from MPI (no rendezvous server); the controller
follows --mpi/--gloo, then HOROVOD_CONTROLLER, then the default (Gloo). Every job has a hard timeout.
"""

from __future__ import annotations

import os
import re
import textwrap

import pytest

from conftest import horovodrun, python_ranks

pytestmark = pytest.mark.timeout(240)

ALLREDUCE = textwrap.dedent(
    """\
    import os
    import numpy as np, horovod.common as hvd
    hvd.init()
    r, s = hvd.rank(), hvd.size()
    total = hvd.allreduce(np.arange(4, dtype=np.float32) * (r + 1), op=hvd.Sum, name="x")
    launcher = "horovodrun" if "HOROVOD_RANK" in os.environ else "mpirun"
    print(f"rank {r}/{s} mpi {hvd.mpi_enabled()} via {launcher} sum {total.tolist()}", flush=True)
    hvd.shutdown()
    """
)


def expected(rank: int, size: int, mpi: bool = True) -> str:
    factor = sum(range(1, size + 1))
    launcher = "mpirun" if mpi else "horovodrun"
    return f"rank {rank}/{size} mpi {mpi} via {launcher} sum {[float(i * factor) for i in range(4)]}"


@pytest.fixture
def env() -> dict[str, str]:
    """This environment without HOROVOD_* (the controller is each test's to choose)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    environ.pop("PYTHONUNBUFFERED", None)  # MPICH prefixes each write: keep a print in one write
    environ["OMP_NUM_THREADS"] = "1"
    return environ


def rank_lines(stdout: str) -> list[str]:
    """The ranks' lines without MPICH's "[rank] " (or horovodrun's "[rank]<stdout>:") prefix."""
    return [re.sub(r"^\[\d+\](<stdout>:| )", "", line) for line in stdout.splitlines()]


@pytest.mark.parametrize("np_", [2, 3, 4])
def test_allreduce_through_horovodrun_mpi(np_: int, env: dict[str, str]) -> None:
    result = horovodrun("--mpi", "-np", str(np_), *python_ranks(ALLREDUCE), env=env)
    assert result.returncode == 0, result.stderr
    lines = rank_lines(result.stdout)
    for rank in range(np_):
        assert expected(rank, np_) in lines, result.stdout


def test_use_mpi_alias_and_hosts(env: dict[str, str]) -> None:
    result = horovodrun("--use-mpi", "-H", "localhost:2", *python_ranks(ALLREDUCE), env=env)
    assert result.returncode == 0, result.stderr
    assert expected(1, 2) in rank_lines(result.stdout)


def test_controller_from_the_environment(env: dict[str, str]) -> None:
    env["HOROVOD_CONTROLLER"] = "mpi"
    result = horovodrun("-np", "2", "--verbose", *python_ranks(ALLREDUCE), env=env)
    assert result.returncode == 0, result.stderr
    assert "controller: mpi (from HOROVOD_CONTROLLER=mpi)" in result.stderr
    assert expected(0, 2) in rank_lines(result.stdout)


def test_gloo_is_the_default_and_the_flag_wins(env: dict[str, str]) -> None:
    default = horovodrun("-np", "2", *python_ranks(ALLREDUCE), env=env)
    assert default.returncode == 0, default.stderr
    assert expected(0, 2, mpi=False) in rank_lines(default.stdout)
    env["HOROVOD_CONTROLLER"] = "mpi"
    flag = horovodrun("-np", "2", "--gloo", *python_ranks(ALLREDUCE), env=env)
    assert flag.returncode == 0, flag.stderr
    assert expected(1, 2, mpi=False) in rank_lines(flag.stdout)


def test_exit_status_of_the_failing_rank_is_propagated(env: dict[str, str]) -> None:
    code = textwrap.dedent(
        """\
        import sys
        import numpy as np, horovod.common as hvd
        hvd.init()
        if hvd.rank() == 1:
            sys.exit(3)
        hvd.allreduce(np.ones(3), name="never.complete")
        print("not reached", flush=True)
        """
    )
    result = horovodrun("--mpi", "-np", "2", *python_ranks(code), env=env)
    assert result.returncode == 3, result
    assert "not reached" not in result.stdout
    summary = [line for line in result.stderr.splitlines() if line.startswith("horovodrun: job failed: ")]
    assert len(summary) == 1 and summary[0].endswith("mpirun exited with code 3"), result.stderr
    # Hydra names no rank; when rank 0 lived long enough to report rank 1 lost, that is the one named.
    named = re.findall(r"job failed: rank (\d+) ", summary[0])
    assert named in ([], ["1"]), summary[0]


def test_an_exception_names_its_rank(env: dict[str, str]) -> None:
    code = textwrap.dedent(
        """\
        import numpy as np, horovod.common as hvd
        hvd.init()
        if hvd.rank() == 2:
            raise ValueError("bad batch on rank two")
        hvd.allreduce(np.ones(3), name="never.complete")
        """
    )
    result = horovodrun("--mpi", "-np", "3", *python_ranks(code), env=env)
    assert result.returncode == 1, result
    assert (
        "horovodrun: job failed: rank 2 raised ValueError: bad batch on rank two; mpirun exited with code 1"
        in result.stderr
    )
