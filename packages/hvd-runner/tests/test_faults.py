"""A rank lost mid-job, through horovodrun: every survivor raises HorovodInternalError naming it,
the launcher ends the job naming the rank and how it ended, and no process is left behind.

Rank 1 fails while the others wait for it in a collective. Every job has a hard timeout.
"""

from __future__ import annotations

import re
import textwrap

import pytest

from conftest import assert_all_gone, horovodrun, python_ranks, reported_pids

pytestmark = pytest.mark.timeout(240)

#: Each rank prints its pid, then rank 1 fails in the way FAULT names while the others wait for it.
FAULTY_JOB = textwrap.dedent(
    """\
    import os, signal, sys, time
    import numpy as np
    import horovod.common as hvd
    from horovod.common.exceptions import HorovodInternalError
    hvd.init()
    print("pid", os.getpid(), flush=True)
    hvd.allreduce(np.ones(4, np.float32), name="warm_up")
    fault = os.environ["FAULT"]
    if hvd.rank() == 1:
        time.sleep(0.5)  # the others are inside the next collective by now
        if fault == "exception":
            raise RuntimeError("injected failure")
        if fault == "exit":
            sys.exit(3)
        if fault == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if fault == "sigsegv":
            os.kill(os.getpid(), signal.SIGSEGV)
        if fault == "sigstop":
            os.kill(os.getpid(), signal.SIGSTOP)
    try:
        hvd.allreduce(np.ones(1 << 16, np.float32), name="gradients")
    except HorovodInternalError as error:
        print(f"survivor {hvd.rank()} HorovodInternalError: {error}", flush=True)
        raise
    print(f"rank {hvd.rank()} was not stopped", flush=True)
    """
)

#: fault -> (what the survivors' error says about rank 1, horovodrun's exit status, how it ended)
DEATHS = {
    "exception": ("uncaught RuntimeError: injected failure", 1, "exited with code 1"),
    "exit": ("exited with code 3", 3, "exited with code 3"),
    "sigkill": ("was killed by signal SIGKILL", 128 + 9, "was killed by signal SIGKILL"),
    "sigsegv": ("was killed by signal SIGSEGV", 128 + 11, "was killed by signal SIGSEGV"),
}


def _survivor_errors(stdout: str) -> dict[int, str]:
    errors = {}
    for line in stdout.splitlines():
        found = re.match(r"\[(\d+)\]<stdout>:survivor (\d+) HorovodInternalError: (.*)", line)
        if found:
            assert found.group(1) == found.group(2), line
            errors[int(found.group(1))] = found.group(3)
    return errors


def _run_faulty_job(np_: int, fault: str, job_env: dict[str, str], **extra_env: str):
    env = dict(job_env, FAULT=fault, **extra_env)
    return horovodrun("-np", str(np_), "-H", f"localhost:{np_}", *python_ranks(FAULTY_JOB), env=env)


@pytest.mark.parametrize("np_", [2, 3])
@pytest.mark.parametrize("fault", sorted(DEATHS))
def test_every_survivor_names_the_lost_rank(np_: int, fault: str, job_env: dict[str, str], backend: str) -> None:
    said, status, ended = DEATHS[fault]
    result = _run_faulty_job(np_, fault, job_env)
    errors = _survivor_errors(result.stdout)
    survivors = [r for r in range(np_) if r != 1]
    assert sorted(errors) == survivors, result.stdout + result.stderr
    for error in errors.values():
        assert "rank 1" in error, error
        assert said in error, error
        assert "'gradients'" in error, error  # what this rank was waiting for
        if backend == "gloo" and fault.startswith("sig"):
            # Gloo's shared-memory transport (the ranks share this host) finds the killed process
            # gone through /proc itself, before the launcher's report.
            assert re.search(r"waiting on rank 1\): lost the peer: its process \(pid \d+\) has exited", error), error
    assert result.returncode == status, result.stderr
    assert re.search(rf"horovodrun: job failed: rank 1 \(pid \d+\) {ended}", result.stderr), result.stderr
    assert "was not stopped" not in result.stdout
    pids = reported_pids(result.stdout.splitlines())
    assert len(pids) == np_, result.stdout
    assert_all_gone(pids)


@pytest.mark.parametrize("np_", [2, 3])
def test_a_hung_rank_is_a_timeout_on_every_survivor(np_: int, job_env: dict[str, str]) -> None:
    """A stopped (not dead) rank: the transport cannot see it gone, so the survivors' collectives
    time out after HOROVOD_GLOO_TIMEOUT_SECONDS; the launcher sees the rank stopped and the
    survivors' errors say so; the launcher then ends the hung rank too."""
    result = _run_faulty_job(np_, "sigstop", job_env, HOROVOD_GLOO_TIMEOUT_SECONDS="3")
    errors = _survivor_errors(result.stdout)
    assert sorted(errors) == [r for r in range(np_) if r != 1], result.stdout + result.stderr
    for error in errors.values():
        assert "timed out after 3 s (HOROVOD_GLOO_TIMEOUT_SECONDS)" in error, error
        # The launcher saw rank 1 stopped and said so before the survivors timed out.
        assert "rank 1 (on localhost): its process (pid" in error and "is stopped (SIGSTOP" in error, error
    assert result.returncode != 0
    assert re.search(r"horovodrun: job failed: rank \d.*; rank\(s\) 1 had been stopped", result.stderr), result.stderr
    pids = reported_pids(result.stdout.splitlines())
    assert len(pids) == np_, result.stdout
    assert_all_gone(pids)


def test_a_rank_that_shuts_down_early_is_named(job_env: dict[str, str]) -> None:
    """hvd.shutdown() on one rank while another waits for it: the waiting rank is told who."""
    code = textwrap.dedent(
        """\
        import numpy as np, time
        import horovod.common as hvd
        from horovod.common.exceptions import HorovodInternalError
        hvd.init()
        if hvd.rank() == 1:
            time.sleep(0.5)
            hvd.shutdown()
        else:
            try:
                hvd.allreduce(np.ones(3), name="never_matched")
            except HorovodInternalError as error:
                print("error:", error, flush=True)
        """
    )
    result = horovodrun("-np", "2", "-H", "localhost:2", *python_ranks(code), env=job_env)
    assert result.returncode == 0, result.stderr
    line = next(out for out in result.stdout.splitlines() if out.startswith("[0]<stdout>:error:"))
    assert "rank 1 shut Horovod down" in line, line
    assert "'never_matched'" in line, line


def test_a_survivor_is_never_reported_as_the_lost_rank(job_env: dict[str, str]) -> None:
    """Rank 1 leaves early (exit 0); rank 0 fails at its next call with HorovodInternalError and
    exits 1. Rank 2, waiting for rank 1, must not be told that rank 0 was lost."""
    code = textwrap.dedent(
        """\
        import time
        import numpy as np
        import horovod.common as hvd
        hvd.init()
        if hvd.rank() == 1:
            time.sleep(0.5)
        elif hvd.rank() == 0:
            time.sleep(1.5)
            hvd.allreduce(np.ones(1), name="too_late")  # Horovod has stopped: exits 1
        else:
            try:
                hvd.allreduce(np.ones(1), name="gradients")
            except hvd.HorovodInternalError as error:
                print("survivor 2 HorovodInternalError:", error, flush=True)
        """
    )
    result = horovodrun("-np", "3", "-H", "localhost:3", *python_ranks(code), env=job_env)
    line = next((out for out in result.stdout.splitlines() if "survivor 2" in out), None)
    assert line is not None, result.stdout + result.stderr
    assert "rank 1 shut Horovod down" in line, line
    assert "the launcher reports: rank 0" not in line, line


def test_a_rank_stopped_for_a_moment_is_not_blamed_later(job_env: dict[str, str]) -> None:
    """Rank 1 is stopped for 1.5 s and resumed (as by a debugger), later rank 2 is killed: the
    survivors' errors name rank 2, not rank 1."""
    code = textwrap.dedent(
        """\
        import os, signal, time
        import numpy as np
        import horovod.common as hvd
        hvd.init()
        pids = hvd.allgather(np.array([os.getpid()]), name="pids").tolist()
        if hvd.rank() == 0:
            os.kill(pids[1], signal.SIGSTOP)
            time.sleep(1.5)
            os.kill(pids[1], signal.SIGCONT)
        hvd.allreduce(np.ones(1), name="after_pause")
        if hvd.rank() == 2:
            time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            hvd.allreduce(np.ones(1), name="gradients")
        except hvd.HorovodInternalError as error:
            print(f"survivor {hvd.rank()} HorovodInternalError: {error}", flush=True)
            raise
        """
    )
    result = horovodrun("-np", "3", "-H", "localhost:3", *python_ranks(code), env=job_env)
    errors = _survivor_errors(result.stdout)
    assert sorted(errors) == [0, 1], result.stdout + result.stderr
    for error in errors.values():
        assert "the launcher reports: rank 2 (on localhost): its process (pid" in error, error
        assert "is stopped" not in error, error
    assert re.search(r"job failed: rank 2 \(pid \d+\) was killed by signal SIGKILL$", result.stderr, re.M), (
        result.stderr
    )
