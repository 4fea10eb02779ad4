"""horovodrun --mpi end to end, under the real MPICH wheel (``mpich`` in the test extra), with ranks
that need no hvd backend: what mpirun gives them, exit statuses, signals, what --verbose prints.

horovodrun --mpi insists on hvd-backend-mpi being installed (the ranks' controller); these tests
are about launching only, so they start horovodrun with that check answered "installed". The ranks
with hvd.init() on MPI are in test_mpi_end_to_end.py. Every job has a hard timeout.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import JOB_TIMEOUT_S, LineReader, assert_all_gone, python_ranks, reported_pids
from horovod.runner import mpi_impl

pytestmark = pytest.mark.timeout(180)

_LAUNCH_WITHOUT_BACKEND_CHECK = (
    "import sys; from horovod.runner import launch, mpi_run; "
    "mpi_run._check_backend = lambda: None; sys.exit(launch.main(sys.argv[1:]))"
)


def horovodrun_argv(*args: str) -> list[str]:
    return [sys.executable, "-c", _LAUNCH_WITHOUT_BACKEND_CHECK, *args]


def horovodrun(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        horovodrun_argv(*args), env=env, capture_output=True, text=True, timeout=JOB_TIMEOUT_S, stdin=subprocess.DEVNULL
    )


@pytest.fixture(scope="module")
def mpich() -> mpi_impl.MpiImpl:
    """The MPICH wheel's launcher, beside this Python (the test extra installs it)."""
    launcher = mpi_impl.find_launcher(os.environ)
    assert launcher is not None, "no mpirun: the test extra installs the mpich wheel (pip install -e '.[test]')"
    impl = mpi_impl.detect(launcher, os.environ)
    assert impl.flavour == mpi_impl.MPICH, f"these tests run under the mpich wheel, found {impl.describe()}"
    return impl


@pytest.fixture
def mpi_env(mpich: mpi_impl.MpiImpl) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    # MPICH prefixes every write with the rank: unbuffered Python would print lines in pieces.
    env.pop("PYTHONUNBUFFERED", None)
    env["OMP_NUM_THREADS"] = "1"
    return env


def tagged(stdout: str) -> dict[int, list[str]]:
    """Lines by rank, from MPICH's "[<rank>] line" prefixes."""
    by_rank: dict[int, list[str]] = {}
    for line in stdout.splitlines():
        if line.startswith("[") and "] " in line:
            rank, _, text = line[1:].partition("] ")
            if rank.isdigit():
                by_rank.setdefault(int(rank), []).append(text)
    return by_rank


WHO = textwrap.dedent(
    """\
    import os
    e = os.environ
    print("who", e["PMI_RANK"], e["PMI_SIZE"], e["HOROVOD_CONTROLLER"], e["HOROVOD_CPU_OPERATIONS"],
          e.get("HVD_TEST_MARK"), e.get("HVD_TEST_ARGS"), "HOROVOD_RANK" in e, flush=True)
    """
)


@pytest.mark.parametrize("np_", [2, 3])
def test_ranks_get_rank_size_and_variables_from_mpirun(np_: int, mpi_env: dict[str, str]) -> None:
    mpi_env["HVD_TEST_MARK"] = "marked"
    mpi_env["HOROVOD_RANK"] = "7"  # stale, from an enclosing job: must not reach the ranks
    result = horovodrun(
        "--mpi", "-np", str(np_), "--mpi-args=-genv HVD_TEST_ARGS 'from mpi-args'", *python_ranks(WHO), env=mpi_env
    )
    assert result.returncode == 0, result.stderr
    lines = tagged(result.stdout)
    assert sorted(lines) == list(range(np_)), result.stdout
    for rank in range(np_):
        assert f"who {rank} {np_} mpi mpi marked from mpi-args False" in lines[rank], result.stdout


def test_exit_status_of_a_failing_rank(mpi_env: dict[str, str]) -> None:
    code = "import os, sys, time; r = int(os.environ['PMI_RANK']); time.sleep(0.2 * r); sys.exit(3 if r == 1 else 0)"
    result = horovodrun("--mpi", "-np", "2", *python_ranks(code), env=mpi_env)
    assert result.returncode == 3, result
    assert "horovodrun: job failed: mpirun exited with code 3" in result.stderr


def test_a_rank_that_raises_is_named(mpi_env: dict[str, str]) -> None:
    code = "import os, time; r = int(os.environ['PMI_RANK']); time.sleep(0.2 * r); assert r != 1, 'rank one fails'"
    result = horovodrun("--mpi", "-np", "3", *python_ranks(code), env=mpi_env)
    assert result.returncode == 1, result
    assert "[1] AssertionError: rank one fails" in result.stderr
    assert (
        "horovodrun: job failed: rank 1 raised AssertionError: rank one fails; mpirun exited with code 1"
        in result.stderr
    )


def test_verbose_prints_the_mpirun_command_and_no_secret(mpi_env: dict[str, str], mpich: mpi_impl.MpiImpl) -> None:
    mpi_env["HVD_TEST_TOKEN"] = "s3cret-value-1234"
    result = horovodrun("--mpi", "-np", "2", "--verbose", "--cycle-time-ms", "2", *python_ranks("pass"), env=mpi_env)
    assert result.returncode == 0, result.stderr
    command = next(line for line in result.stderr.splitlines() if line.startswith("horovodrun: command: "))
    assert command.startswith(
        f"horovodrun: command: {mpich.path} -prepend-rank -np 2 -hosts localhost:2 -bind-to none -genvlist "
    )
    assert "HVD_TEST_TOKEN" in command and "HOROVOD_CYCLE_TIME" in command
    assert "horovodrun:   HOROVOD_CYCLE_TIME=2.0" in result.stderr.splitlines()
    assert "s3cret-value-1234" not in result.stderr + result.stdout


def test_unknown_mpirun_option_fails_with_mpiruns_status(mpi_env: dict[str, str]) -> None:
    result = horovodrun("--mpi", "-np", "1", "--mpi-args=--no-such-option-hvd", *python_ranks("pass"), env=mpi_env)
    assert result.returncode != 0, result
    assert "horovodrun: job failed: mpirun exited with code" in result.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_stops_every_rank(signum: int, mpi_env: dict[str, str]) -> None:
    code = "import os, time; print('pid', os.getpid(), flush=True); time.sleep(120)"
    with subprocess.Popen(
        horovodrun_argv("--mpi", "-np", "2", *python_ranks(code)),
        env=mpi_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None  # both are pipes
        out = LineReader(proc.stdout)
        try:
            lines = out.wait_for(lambda ls: len([line for line in ls if "] pid " in line]) >= 2, timeout=60)
            pids = reported_pids(line.partition("] ")[2] for line in lines)
            assert len(pids) == 2, lines
            proc.send_signal(signum)
            assert proc.wait(timeout=60) == 128 + signum
            assert f"interrupted ({signal.Signals(signum).name})" in proc.stderr.read()
            assert_all_gone(pids)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            out.rest(timeout=10)
