"""Intra-op threads per rank (horovod/runner/threads.py): each host's cores over its ranks, unless the
user set the variables; --num-threads-per-rank N for every rank; 0 to leave them alone."""

from __future__ import annotations

import os
import sys

import pytest

from conftest import horovodrun
from horovod.runner import threads
from horovod.runner.errors import UsageError

PRINT_THREADS = f"import os; print('threads', *[os.environ.get(v, '-') for v in {threads.VARIABLES!r}])"


def test_the_hosts_cores_are_shared_among_its_ranks() -> None:
    env = threads.apply({"HOROVOD_LOCAL_SIZE": "4"}, cores=16)
    assert [env[v] for v in threads.VARIABLES] == ["4"] * len(threads.VARIABLES)
    assert threads.apply({"HOROVOD_LOCAL_SIZE": "3"}, cores=2)["OMP_NUM_THREADS"] == "1"  # at least one


def test_what_the_user_set_is_kept_unless_a_number_is_asked_for() -> None:
    env = threads.apply({"HOROVOD_LOCAL_SIZE": "2", "OMP_NUM_THREADS": "7"}, cores=8)
    assert env["OMP_NUM_THREADS"] == "7" and env["MKL_NUM_THREADS"] == "4"
    env = threads.apply({"HOROVOD_LOCAL_SIZE": "2", "OMP_NUM_THREADS": "7", threads.SETTING: "3"}, cores=8)
    assert [env[v] for v in threads.VARIABLES] == ["3"] * len(threads.VARIABLES)
    assert threads.apply({"HOROVOD_LOCAL_SIZE": "2", threads.SETTING: "0"}, cores=8) == {
        "HOROVOD_LOCAL_SIZE": "2",
        threads.SETTING: "0",
    }


def test_a_bad_setting_is_named() -> None:
    with pytest.raises(UsageError, match="HOROVOD_NUM_THREADS_PER_RANK='many'"):
        threads.requested({threads.SETTING: "many"})


@pytest.mark.timeout(120)
def test_horovodrun_gives_each_rank_its_share_and_says_so() -> None:
    env = {k: v for k, v in os.environ.items() if k not in threads.VARIABLES and k != threads.SETTING}
    result = horovodrun("-np", "2", "-H", "localhost:2", sys.executable, "-c", PRINT_THREADS, env=env, timeout=100)
    assert result.returncode == 0, result.stderr
    expected = str(threads.share(threads.host_cores(), 2))
    seen = [line for line in result.stdout.splitlines() if "threads " in line]
    assert len(seen) == 2 and all(line.split()[-len(threads.VARIABLES) :] == [expected] * 4 for line in seen), seen
    assert "intra-op threads per rank" in result.stderr and "localhost" in result.stderr, result.stderr


@pytest.mark.timeout(120)
def test_zero_leaves_the_variables_alone() -> None:
    env = {k: v for k, v in os.environ.items() if k not in threads.VARIABLES}
    result = horovodrun(
        "-np", "2", "-H", "localhost:2", "--num-threads-per-rank", "0", sys.executable, "-c", PRINT_THREADS, env=env
    )
    assert result.returncode == 0, result.stderr
    seen = [line for line in result.stdout.splitlines() if "threads " in line]
    assert all(line.split()[-4:] == ["-"] * 4 for line in seen) and len(seen) == 2, seen
    assert "intra-op threads per rank" not in result.stderr
