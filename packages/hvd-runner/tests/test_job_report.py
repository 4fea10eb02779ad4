"""The job-end report through horovodrun: a straggler is named with about its delay, a job that
loses a rank still reports the survivors and how the lost one ended, --report-file writes valid
JSON, --no-job-report silences the summary. Every job has a hard timeout."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from conftest import horovodrun, python_ranks

pytestmark = pytest.mark.timeout(240)

#: Rank 2 sleeps LATE seconds before each of STEPS allreduces; the others go straight in.
STRAGGLER_JOB = textwrap.dedent(
    """\
    import os, time
    import numpy as np
    import horovod.common as hvd
    hvd.init()
    late = float(os.environ["LATE"])
    for step in range(6):
        if hvd.rank() == 2:
            time.sleep(late)
        hvd.allreduce(np.ones(256, np.float32), name="gradient")
        hvd.allgather(np.ones((2, 2), np.float32), name="rows")
    hvd.shutdown()
    """
)

#: Rank 1 is killed at its sixth step; the others fail in the collective that waits for it.
KILLED_JOB = textwrap.dedent(
    """\
    import os, signal
    import numpy as np
    import horovod.common as hvd
    hvd.init()
    for step in range(20):
        if hvd.rank() == 1 and step == 5:
            os.kill(os.getpid(), signal.SIGKILL)
        hvd.allreduce(np.ones(256, np.float32), name="gradient")
    """
)


def _summary(stderr: str) -> list[str]:
    return [line.split("horovodrun: ", 1)[1] for line in stderr.splitlines() if "horovodrun: " in line]


def test_a_rank_late_at_every_collective_is_named_the_straggler(job_env: dict[str, str], tmp_path: Path) -> None:
    late = 0.3
    report_file = tmp_path / "reports" / "job.json"
    done = horovodrun(
        "-np",
        "3",
        "-H",
        "localhost:3",
        "--report-file",
        str(report_file),
        *python_ranks(STRAGGLER_JOB),
        env={**job_env, "LATE": str(late)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_file.read_text())
    assert report["schema"] == "hvd-job-report/1" and report["failure"] is None and report["missing_ranks"] == {}
    assert [r["rank"] for r in report["ranks"]] == [0, 1, 2]
    (first, *others) = report["stragglers"]
    assert first["rank"] == 2 and first["times"] >= 6, report["stragglers"]
    # It cannot arrive sooner than its sleep after the others (they go straight in): the measured
    # lateness is at least most of it.
    assert first["mean_late_seconds"] >= 0.8 * late, first
    assert all(o["share"] < first["share"] for o in others), report["stragglers"]
    assert report["ops"]["allreduce"]["tensors"] == 18 and report["ops"]["allgather"]["tensors"] == 18
    # The others waited for it; it did not wait for them.
    waits = {r["rank"]: sum(s["wait_seconds"] for s in r["sets"].values()) for r in report["ranks"]}
    assert waits[0] > waits[2] and waits[1] > waits[2], waits
    lines = _summary(done.stderr)
    assert any(line.startswith("job report: 3 of 3 ranks reported") for line in lines), lines
    assert any("straggler: rank 2 arrived last at" in line for line in lines), lines
    assert any(line == f"job report: written to {report_file}" for line in lines), lines


def test_a_killed_rank_leaves_the_survivors_report_and_how_it_ended(job_env: dict[str, str], tmp_path: Path) -> None:
    report_file = tmp_path / "job.json"
    done = horovodrun(
        "-np", "3", "-H", "localhost:3", "--report-file", str(report_file), *python_ranks(KILLED_JOB), env=job_env
    )
    assert done.returncode == 128 + 9, done.stdout + done.stderr
    report = json.loads(report_file.read_text())
    assert [r["rank"] for r in report["ranks"]] == [0, 2]
    assert report["missing_ranks"] == {"1": "was killed by signal SIGKILL"}
    assert report["failure"] == "rank 1 was killed by signal SIGKILL"
    assert all(r["sets"]["0"]["ops"]["allreduce"]["tensors"] >= 5 for r in report["ranks"]), report["ranks"]
    lines = _summary(done.stderr)
    assert "  rank 1: was killed by signal SIGKILL" in lines, lines
    assert "  the job failed: rank 1 was killed by signal SIGKILL" in lines, lines


def test_no_job_report_silences_the_summary_but_not_the_file(job_env: dict[str, str], tmp_path: Path) -> None:
    report_file = tmp_path / "job.json"
    done = horovodrun(
        "-np",
        "3",
        "-H",
        "localhost:3",
        "--no-job-report",
        "--report-file",
        str(report_file),
        *python_ranks(STRAGGLER_JOB),
        env={**job_env, "LATE": "0"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert not [line for line in _summary(done.stderr) if line.startswith("job report")], done.stderr
    assert len(json.loads(report_file.read_text())["ranks"]) == 3
