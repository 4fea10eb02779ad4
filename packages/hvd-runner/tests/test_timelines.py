"""Every rank's timeline through horovodrun (--timeline-all-ranks): each rank writes its own file,
which stays valid JSON, and horovodrun merges them into one trace on rank 0's clock with a track per
rank, in which no collective completes on any rank before the last rank submitted it (causality,
within the measured clock uncertainty) and a late rank's submissions come late. Hard timeouts."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from conftest import horovodrun, python_ranks

pytestmark = pytest.mark.timeout(240)
LATE_S = 0.25
STEPS = 4

#: Rank 2 sleeps before each step's allreduce.
JOB = textwrap.dedent(
    f"""\
    import time
    import numpy as np
    import horovod.common as hvd
    hvd.init()
    for step in range({STEPS}):
        if hvd.rank() == 2:
            time.sleep({LATE_S})
        hvd.allreduce(np.ones(1024, np.float32), name="gradient")
    hvd.shutdown()
    """
)


def _phases(events: list[dict], rank: int, phase: str, tensor_row: int) -> list[tuple[float, float]]:
    """(begin, end) of each `phase` of the row's tensor on `rank`'s track, in order."""
    spans, stack = [], []
    for e in events:
        if e.get("pid") != rank or e.get("tid") != tensor_row or e["ph"] not in "BE":
            continue
        if e["ph"] == "B":
            stack.append((e["name"], e["ts"]))
        else:
            name, begin = stack.pop()
            if name == phase:
                spans.append((begin, e["ts"]))
    return spans


def test_the_ranks_timelines_merge_on_one_clock(job_env: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "timeline.json"
    done = horovodrun(
        "-np",
        "3",
        "-H",
        "localhost:3",
        "--no-job-report",
        "--timeline-filename",
        str(path),
        "--timeline-all-ranks",
        *python_ranks(JOB),
        env=job_env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "timeline: 3 of 3 ranks' timelines merged into" in done.stderr, done.stderr
    for rank in range(3):  # each rank's own file is a valid trace too
        assert any(e.get("name") == "hvd_clock" for e in json.loads(Path(f"{path}.rank{rank}").read_text()))
    merged = json.loads(path.read_text())
    meta, events = merged["metadata"], merged["traceEvents"]
    assert meta["ranks"] == [0, 1, 2] and meta["collectives_compared"] >= 2 * STEPS
    tracks = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert tracks == {0: "rank 0", 1: "rank 1", 2: "rank 2"}
    row = {e["pid"]: e["tid"] for e in events if e.get("name") == "thread_name" and e["args"]["name"] == "gradient"}
    negotiations = {r: _phases(events, r, "NEGOTIATE_ALLREDUCE", row[r]) for r in range(3)}
    completions = {r: _phases(events, r, "ALLREDUCE", row[r]) for r in range(3)}
    slack = sum(meta["clock_uncertainty_us"].values())
    for step in range(STEPS):
        submitted = [negotiations[r][step][0] for r in range(3)]
        done_at = [completions[r][step][1] for r in range(3)]
        # Nothing completes anywhere before the last rank submitted it.
        assert min(done_at) >= max(submitted) - slack, (step, submitted, done_at, slack)
        # The late rank submits last, by about its sleep (it cannot be sooner).
        assert submitted[2] - max(submitted[:2]) >= 0.8 * LATE_S * 1e6 - slack, (step, submitted)
    # The picture of it: a band per rank, a bar per phase.
    from horovod.common.plugin_api import timelines

    svg = timelines.to_svg(merged)
    assert svg.startswith("<svg") and all(f">rank {r}</text>" in svg for r in range(3))
    assert svg.count("<title>NEGOTIATE_ALLREDUCE") >= 3 * STEPS and svg.count("<title>ALLREDUCE ") >= 3 * STEPS
