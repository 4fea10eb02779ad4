"""Collective misuse in real jobs through horovodrun: stalls reported and (optionally) shut down,
disagreements raised on every rank, local misuse refused at call time. Every job has a hard timeout.
"""

from __future__ import annotations

import re
import textwrap

import pytest

from conftest import horovodrun, python_ranks

pytestmark = pytest.mark.timeout(240)


def _lines(stdout: str, tag: str) -> dict[int, str]:
    """``rank -> text`` of the lines ranks printed as ``<tag> <text>``."""
    found = {}
    for line in stdout.splitlines():
        match = re.match(rf"\[(\d+)\]<stdout>:{tag} (.*)", line)
        if match:
            found[int(match.group(1))] = match.group(2)
    return found


@pytest.mark.parametrize("np_", [2, 3])
def test_disagreements_and_call_time_errors(np_: int, job_env: dict[str, str]) -> None:
    """hvd-core's conformance cases for misuse, as separate processes under horovodrun: shape,
    dtype, op, root, scale and kind disagreements raise on every rank naming the tensor and the
    rank that disagrees; a bad root, bad splits, an unsupported dtype or op, or a process set this
    rank is not in, fail at call time."""
    code = textwrap.dedent(
        """\
        import horovod.common as hvd
        from horovod.common.testing import cases
        cases.case_mismatches()
        cases.case_call_time_errors()
        hvd.shutdown()  # the next case starts Horovod again, with static process sets
        cases.case_static_process_sets()
        print("passed", hvd.rank(), flush=True)
        hvd.shutdown()
        """
    )
    result = horovodrun("-np", str(np_), "-H", f"localhost:{np_}", *python_ranks(code), env=job_env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(_lines(result.stdout, "passed")) == list(range(np_)), result.stdout


LATE_RANK = textwrap.dedent(
    """\
    import os, time
    import numpy as np
    import horovod.common as hvd
    hvd.init()
    last = hvd.size() - 1
    try:
        if hvd.rank() == last:
            time.sleep(float(os.environ["LATE_BY"]))
        hvd.allreduce(np.ones(2), name="late_tensor")
        print("completed", hvd.rank(), flush=True)
    except hvd.HorovodInternalError as error:
        print("error", error, flush=True)
        raise
    """
)


@pytest.mark.parametrize("np_", [2, 3])
def test_stall_warning_names_the_tensor_and_the_missing_rank(np_: int, job_env: dict[str, str]) -> None:
    env = dict(job_env, LATE_BY="4", HOROVOD_STALL_CHECK_TIME_SECONDS="1")
    result = horovodrun("-np", str(np_), "-H", f"localhost:{np_}", *python_ranks(LATE_RANK), env=env)
    assert result.returncode == 0, result.stderr  # a stall is only reported: the job completes
    last = np_ - 1
    warnings = [e for e in result.stderr.splitlines() if e.startswith("[0]<stderr>:") and "Stall detected" in e]
    assert warnings, result.stderr
    assert f"Rank {last} has not submitted: 'late_tensor'" in warnings[0], warnings[0]
    assert f"submitted by ranks {list(range(last))}" in warnings[0], warnings[0]
    assert sorted(_lines(result.stdout, "completed")) == list(range(np_))


@pytest.mark.parametrize("np_", [2, 3])
def test_stall_shutdown_fails_every_rank_with_the_report(np_: int, job_env: dict[str, str]) -> None:
    env = dict(job_env, LATE_BY="30", HOROVOD_STALL_CHECK_TIME_SECONDS="1", HOROVOD_STALL_SHUTDOWN_TIME_SECONDS="2")
    result = horovodrun("-np", str(np_), "-H", f"localhost:{np_}", *python_ranks(LATE_RANK), env=env)
    assert result.returncode != 0
    errors = _lines(result.stdout, "error")
    last = np_ - 1
    # The late rank is still asleep when the job ends; every rank that was waiting raised.
    assert sorted(errors) == list(range(last)), result.stdout + result.stderr
    for error in errors.values():
        assert f"Rank {last} has not submitted: 'late_tensor'" in error, error
    assert "job failed" in result.stderr


def test_stall_in_a_process_set_reaches_the_ranks_outside_it(job_env: dict[str, str]) -> None:
    """Rank 0 waits in process set {0, 1} for rank 1, which never comes; rank 2 is not in that set,
    yet it raises the same stall error at its next call instead of waiting for a timeout."""
    code = textwrap.dedent(
        """\
        import time
        import numpy as np
        import horovod.common as hvd
        ps = hvd.ProcessSet([0, 1])
        hvd.init(process_sets=[ps])
        try:
            if hvd.rank() == 0:
                hvd.allreduce(np.ones(2), name="pair_tensor", process_set=ps)
            else:
                time.sleep(8)
                hvd.allreduce(np.ones(2), name="everyone")
        except hvd.HorovodInternalError as error:
            print("error", error, flush=True)
        """
    )
    env = dict(job_env, HOROVOD_STALL_CHECK_TIME_SECONDS="1", HOROVOD_STALL_SHUTDOWN_TIME_SECONDS="2")
    result = horovodrun("-np", "3", "-H", "localhost:3", *python_ranks(code), env=env)
    errors = _lines(result.stdout, "error")
    assert sorted(errors) == [0, 1, 2], result.stdout + result.stderr
    for error in errors.values():
        assert "Stall detected in process set 1" in error, error
        assert "Rank 1 has not submitted: 'pair_tensor'" in error, error
