"""The job-end report's counters in the engine (ranks as threads on the in-memory backend) and
its merging and summary (horovod.common.job_report)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from horovod.common import job_report
from horovod.common.testing import run_cluster

pytestmark = pytest.mark.timeout(180)
LATE_S = 0.2


def _straggling_rank() -> dict:
    import horovod.common as hvd
    from horovod.common import state

    hvd.init()
    for _ in range(5):
        if hvd.rank() == 2:
            time.sleep(LATE_S)
        hvd.allreduce(np.ones(64, np.float32), name="gradient")  # cached after its first time
    for step in range(3):
        if hvd.rank() == 1:
            time.sleep(LATE_S)
        hvd.broadcast(np.ones(4, np.float32), root_rank=0, name=f"fresh.{step}")  # a new name: negotiated anew
    return job_report.rank_report(state.context().engine, hvd.rank(), hvd.size())


def test_the_set_rank_0_names_who_arrived_last_at_cached_and_new_tensors() -> None:
    reports = run_cluster(_straggling_rank, 3)
    report = job_report.job_report(reports, 3)
    json.dumps(report)  # plain data
    by_rank = {s["rank"]: s for s in report["stragglers"]}
    assert by_rank[2]["times"] >= 4 and by_rank[2]["most_tensor"] == "gradient", report["stragglers"]
    assert by_rank[1]["times"] == 3 and by_rank[1]["most_tensor"].startswith("fresh."), report["stragglers"]
    assert by_rank[2]["mean_late_seconds"] >= 0.8 * LATE_S and by_rank[1]["mean_late_seconds"] >= 0.8 * LATE_S
    assert report["ops"]["allreduce"]["tensors"] == 15 and report["ops"]["broadcast"]["tensors"] == 9
    assert report["ops"]["allreduce"]["bytes"] == 15 * 64 * 4
    # Only the set's rank 0 sees arrivals.
    assert reports[1]["sets"]["0"]["arrivals"] == reports[2]["sets"]["0"]["arrivals"] == 0
    assert reports[0]["sets"]["0"]["arrivals"] == 8
    slowest = {t["name"] for t in report["slowest_tensors"]}
    assert "gradient" in slowest


def _report(rank: int, wait: float, last: dict) -> dict:
    return {
        "schema": job_report.SCHEMA,
        "rank": rank,
        "sets": {
            "0": {
                "ops": {"allreduce": {"tensors": 10, "bytes": 4096, "seconds": 0.5}},
                "wait_seconds": wait,
                "slowest_tensors": [
                    {"name": "w", "count": 10, "bytes": 4096, "seconds": 1.0, "most_seconds": 0.2, "wait_seconds": wait}
                ],
                "arrivals": 10 if rank == 0 else 0,
                "last_arrivals": last,
                "stalls": 0,
                "stalled_tensors": {"w": 1} if rank == 2 else {},
            }
        },
    }


def test_merging_names_missing_ranks_stragglers_and_the_failure() -> None:
    last = {"2": {"times": 9, "late_seconds": 2.7, "most_seconds": 0.4, "most_tensor": "w"}}
    reports = [_report(0, 3.0, last), _report(2, 0.1, {}), {"schema": "something else", "rank": 1}]
    report = job_report.job_report(reports, 4, failure="rank 3 exited with status 1", ended={3: "exited with status 1"})
    assert [r["rank"] for r in report["ranks"]] == [0, 2]
    assert report["missing_ranks"] == {"1": "no report (it did not reach shutdown)", "3": "exited with status 1"}
    assert report["ops"] == {"allreduce": {"tensors": 20, "bytes": 8192, "seconds": 1.0}}
    (straggler,) = report["stragglers"]
    assert straggler["rank"] == 2 and straggler["share"] == 0.9 and straggler["mean_late_seconds"] == pytest.approx(0.3)
    assert report["stalled_tensors"] == {"w": 1}
    lines = job_report.summary(report)
    assert lines[0] == "job report: 2 of 4 ranks reported; allreduce 20 tensors 8.0 KiB"
    assert "  straggler: rank 2 arrived last at 9 collectives (90%), 300 ms after the first on average" in "\n".join(
        lines
    )
    assert "  rank 1: no report (it did not reach shutdown)" in lines
    assert lines[-1] == "  the job failed: rank 3 exited with status 1"


def test_a_rank_last_now_and_then_is_not_called_a_straggler() -> None:
    last = {"1": {"times": 1, "late_seconds": 0.002, "most_seconds": 0.002, "most_tensor": "w"}}
    report = job_report.job_report([_report(0, 0.0, last), _report(1, 0.0, {})], 2)
    assert report["stragglers"][0]["share"] == 0.1
    assert not [line for line in job_report.summary(report) if "straggler" in line]
