"""Elastic jobs through horovodrun, end to end: real workers (elastic_worker.py, numpy), real Gloo,
faults injected by the workers themselves or by the test changing what the discovery script prints.

Several "hosts" of one machine: ``localhost`` and ``127.0.0.1`` both name this machine, so both run
workers without ssh, but the driver counts them as two hosts (blacklisting, removal). The same jobs
across network-namespace hosts are in test_elastic_multi_host.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from elastic_jobs import ElasticJob, assert_finished_consistently, discovery, done_lines, set_hosts
from horovod.runner import threads

pytestmark = pytest.mark.timeout(180)


def test_worker_killed_mid_run(job_env: dict[str, str], tmp_path: Path) -> None:
    """SIGKILL of a worker: the others restore the last commit and go on at once; the replacement
    the driver starts joins at a later commit and receives the state; no step counted twice or lost."""
    env = {**job_env, "STEPS": "150", "STEP_SLEEP": "0.03", "KILL_WORKER": "2", "KILL_AT_STEP": "30"}
    report_file = tmp_path / "report.json"
    job = ElasticJob(
        ["-np", "3", "--min-np", "2", "-H", "localhost:3", "--report-file", str(report_file)], env, tmp_path
    )
    code, out, err = job.finish()
    log = "\n".join(err)
    assert code == 0, log
    assert "worker 2 (on localhost, slot 2) failed: its process was killed by signal SIGKILL" in log
    assert re.search(r"world 1 formed in .*: 2 worker\(s\) on localhost:2", log), log
    assert re.search(r"world 2 formed in .*: 3 worker\(s\) on localhost:3", log), log  # the replacement joined
    assert_finished_consistently(out, 3, 150)
    # The job-end report is the last world's: its 3 ranks' counts, each posted from that world.
    assert "job report: elastic: 2 reset(s); the counts below are the last world's (world 2: 3 rank(s)" in log, log
    report = json.loads(report_file.read_text())
    assert report["elastic"] == {"generation": 2, "resets": 2, "hosts": ["localhost"] * 3}, report["elastic"]
    assert [r["rank"] for r in report["ranks"]] == [0, 1, 2] and report["failure"] is None, report


def test_host_added_by_discovery(job_env: dict[str, str], tmp_path: Path) -> None:
    script, listing = discovery(tmp_path, "localhost:2\n")
    env = {k: v for k, v in job_env.items() if k not in threads.VARIABLES}
    env = {**env, "STEPS": "200", "STEP_SLEEP": "0.03"}
    job = ElasticJob(["--min-np", "2", "--max-np", "3", "--host-discovery-script", script], env, tmp_path)
    job.wait_log(r"world 0 formed")
    set_hosts(listing, "localhost:2\n127.0.0.1:1\n")
    code, out, err = job.finish()
    log = "\n".join(err)
    assert code == 0, log
    assert "hosts changed: added 127.0.0.1:1" in log
    assert re.search(r"world 1 formed in .*: 3 worker\(s\) on localhost:2, 127.0.0.1:1", log), log
    assert_finished_consistently(out, 3, 200)  # the new worker's state came from rank 0
    # Each worker's threads are its host's cores over the host's slots, as discovery gave them.
    cores = threads.host_cores()
    expected = sorted([str(threads.share(cores, 2))] * 2 + [str(threads.share(cores, 1))])
    assert sorted(d["omp"] for d in done_lines(out)) == expected, out
    assert "intra-op threads per rank" in log and "each host's cores over its slots" in log, log


def test_host_removed_by_discovery(job_env: dict[str, str], tmp_path: Path) -> None:
    script, listing = discovery(tmp_path, "localhost:2\n127.0.0.1:1\n")
    env = {**job_env, "STEPS": "200", "STEP_SLEEP": "0.03"}
    job = ElasticJob(["--min-np", "2", "--host-discovery-script", script], env, tmp_path)
    job.wait_log(r"world 0 formed")
    set_hosts(listing, "localhost:2\n")
    code, out, err = job.finish()
    log = "\n".join(err)
    assert code == 0, log
    assert "worker 2 (on 127.0.0.1, slot 0) leaves the job: its host was removed" in log
    assert "elastic worker 2 leaves the job: its host was removed" in "\n".join(err)  # it exited by itself
    assert re.search(r"world 1 formed in .*: 2 worker\(s\) on localhost:2", log), log
    assert "failed" not in log
    assert_finished_consistently(out, 2, 200)


def test_every_host_replaced_by_discovery(job_env: dict[str, str], tmp_path: Path) -> None:
    """Discovery swaps every host for a new one: all members leave, and the newcomers, with no
    member left to commit and let them in, form the next world themselves (from their own state)."""
    script, listing = discovery(tmp_path, "localhost:2\n")
    env = {**job_env, "STEPS": "200", "STEP_SLEEP": "0.03"}
    job = ElasticJob(["--min-np", "2", "--host-discovery-script", script], env, tmp_path)
    job.wait_log(r"world 0 formed")
    set_hosts(listing, "127.0.0.1:2\n")
    code, out, err = job.finish()
    log = "\n".join(err)
    assert code == 0, log
    assert "world 0 is over (every member has left)" in log, log
    assert re.search(r"world 1 formed in .*: 2 worker\(s\) on 127\.0\.0\.1:2", log), log
    done = done_lines(out)
    assert len(done) == 2 and all(d["size"] == "2" and d["steps"] == "200" for d in done), out


def test_failing_host_is_blacklisted_then_retried(job_env: dict[str, str], tmp_path: Path) -> None:
    """Workers on 127.0.0.1 always fail: the first failure is replaced, the second blacklists the
    host; after the cool-down it is tried again (and blacklisted again); the job goes on elsewhere."""
    script, _ = discovery(tmp_path, "localhost:2\n127.0.0.1:1\n")
    env = {**job_env, "STEPS": "400", "STEP_SLEEP": "0.03", "FAIL_ON_HOST": "127.0.0.1"}
    args = ["--min-np", "2", "--blacklist-cooldown-range", "2", "2", "--host-discovery-script", script]
    job = ElasticJob(args, env, tmp_path)
    job.wait_log(r"host 127\.0\.0\.1 blacklisted for \d+ s: its workers failed 2 times", count=2)
    code, out, err = job.finish()
    log = "\n".join(err)
    assert code == 0, log
    first = log.index("host 127.0.0.1 blacklisted")
    assert "hosts changed: added 127.0.0.1:1" in log[first:], log  # back after its cool-down
    assert re.search(r"world \d+ formed in .*: 2 worker\(s\) on localhost:2", log), log
    assert_finished_consistently(out, 2, 400)


def test_reset_limit_ends_the_job(job_env: dict[str, str], tmp_path: Path) -> None:
    """--reset-limit 1: the reset after the kill is allowed; the next one (the replacement joining) is not."""
    env = {**job_env, "STEPS": "400", "STEP_SLEEP": "0.03", "KILL_WORKER": "1", "KILL_AT_STEP": "20"}
    job = ElasticJob(["-np", "2", "--min-np", "1", "--reset-limit", "1", "-H", "localhost:2"], env, tmp_path)
    code, _, err = job.finish()
    log = "\n".join(err)
    assert code == 1, log
    assert "world 1 formed" in log
    assert "job failed: the job was reset 1 time(s), reaching --reset-limit 1" in log


def test_too_few_workers_past_elastic_timeout(job_env: dict[str, str], tmp_path: Path) -> None:
    script, listing = discovery(tmp_path, "localhost:2\n")
    env = {**job_env, "STEPS": "100000", "STEP_SLEEP": "0.02"}
    args = ["--min-np", "2", "--elastic-timeout", "3", "--host-discovery-script", script]
    job = ElasticJob(args, env, tmp_path)
    job.wait_log(r"world 0 formed")
    set_hosts(listing, "localhost:1\n")
    code, _, err = job.finish()
    log = "\n".join(err)
    assert code == 1, log
    assert (
        "job failed: 1 worker(s) left, fewer than --min-np 2, for --elastic-timeout 3 s (hosts now: localhost:1)" in log
    )


@pytest.mark.parametrize(
    ("faults", "expected"),
    [
        ({"KILL_WORKER": "1", "KILL_MODE": "commit"}, "worker 1 dies inside save()"),
        ({"KILL_WORKER": "2", "DIE_IN_RESTORE": "1"}, "worker 1 dies inside restore(), as the next world forms"),
        # Worker 0 learns of it from the driver's loss report while it waits for worker 1's address,
        # and gives up on that world at once (not after the backend's connection timeout).
        ({"KILL_WORKER": "2", "DIE_AFTER_ASSIGNMENT": "1"}, "elastic: joining the new world failed ("),
        # Alive but frozen: the driver kills it rather than wait --elastic-timeout for it to ask.
        (
            {"KILL_WORKER": "2", "STOP_IN_RESTORE": "1"},
            "worker 1 (on localhost, slot 1) is stopped (SIGSTOP, or a debugger) and a new world waits: killed",
        ),
    ],
    ids=["during-commit", "during-reset", "during-connect", "frozen-during-reset"],
)
def test_worker_killed_at_the_worst_moment(
    job_env: dict[str, str], tmp_path: Path, faults: dict[str, str], expected: str
) -> None:
    """A worker dies in the middle of commit(), while the next world forms after another worker's
    death, or as it connects to that world; or it freezes: nothing hangs, and the job finishes with
    every step counted once."""
    env = {**job_env, "STEPS": "120", "STEP_SLEEP": "0.02", "KILL_AT_STEP": "25", **faults}
    job = ElasticJob(["-np", "3", "--min-np", "1", "-H", "localhost:3"], env, tmp_path)
    code, out, err = job.finish()
    log = "\n".join(err)
    assert code == 0, log
    assert expected in "\n".join(out + err), out + err
    done = done_lines(out)
    assert done and all(d["log_ok"] == "True" and d["steps"] == "120" for d in done), done
    assert len({d["total"] for d in done}) == 1, done


def _elastic_function(marker: str) -> tuple[int, int, bool]:
    """horovod.run's elastic function: worker 1 dies once at step 20."""
    import os
    import signal
    import time

    import numpy as np

    import horovod.common as hvd
    from horovod.common import elastic

    hvd.init()
    state = elastic.ObjectState(step=0, log=[])

    @elastic.run
    def train(state: elastic.ObjectState) -> None:
        while state.step < 120:
            if state.step == 20 and os.environ["HOROVOD_ELASTIC_WORKER_ID"] == "1" and not os.path.exists(marker):
                open(marker, "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
            hvd.allreduce(np.ones(1), name="x")
            state.log.append(state.step)
            state.step += 1
            time.sleep(0.03)
            state.commit()

    train(state)
    return hvd.rank(), hvd.size(), state.log == list(range(120))


def test_horovod_run_elastic_returns_the_last_worlds_results(job_env: dict[str, str], tmp_path: Path) -> None:
    import horovod

    marker = str(tmp_path / "killed")
    env = {"HOROVOD_CPU_OPERATIONS": job_env["HOROVOD_CPU_OPERATIONS"]}
    results = horovod.run(
        _elastic_function, args=(marker,), min_num_proc=1, max_num_proc=2, hosts="localhost:2", env=env
    )
    assert Path(marker).exists()
    assert results in ([(0, 2, True), (1, 2, True)], [(0, 1, True)]), results  # the replacement may not make it
