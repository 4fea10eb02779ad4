"""The timeline file is valid JSON at every moment: while the job runs, after its process is
killed outright, and when it stops at its size cap (HOROVOD_TIMELINE_MAX_BYTES) with a note. A
step window (HOROVOD_TIMELINE_STEPS) records only those steps."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import horovod.common as hvd
from horovod.common.config import timeline_steps
from horovod.common.testing import run_cluster

FLUSH_S = 0.1  # Timeline::kFlushUs


def test_the_file_parses_while_the_timeline_runs(tmp_path) -> None:
    path = tmp_path / "running.json"

    def case() -> list:
        hvd.init()
        hvd.allreduce(np.ones(4), name="first")
        for _ in range(5):  # the engine cycles for each, and writes what it kept every FLUSH_S
            time.sleep(2 * FLUSH_S)
            hvd.allreduce(np.ones(4), name="tick")
        events = json.loads(path.read_text()) if hvd.rank() == 0 else []  # the timeline still runs
        hvd.allreduce(np.ones(4), name="after")
        return events

    events = run_cluster(case, 2, env={"HOROVOD_TIMELINE": str(path)})[0]
    rows = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert "first" in rows, rows


def test_a_killed_rank_leaves_a_file_that_parses(tmp_path) -> None:
    path = tmp_path / "killed.json"
    code = textwrap.dedent(
        f"""
        import os, signal, time
        import numpy as np
        import horovod.common as hvd
        from horovod.common.testing import run_cluster

        def case():
            hvd.init()
            for step in range(200):
                hvd.allreduce(np.ones(64), name=f"step.{{step % 7}}")
                if step == 100:
                    time.sleep(0.3)  # the kept events are written by now
                    os.kill(os.getpid(), signal.SIGKILL)

        run_cluster(case, 2, env={{"HOROVOD_TIMELINE": {str(path)!r}}})
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    events = json.loads(path.read_text())
    assert any(e.get("name") == "ALLREDUCE" for e in events), events[:5]


def test_the_size_cap_stops_the_timeline_with_a_note(tmp_path) -> None:
    path = tmp_path / "capped.json"
    cap = 8192

    def case() -> None:
        hvd.init()
        for step in range(300):
            hvd.allreduce(np.ones(8), name=f"grad.{step % 20}")

    run_cluster(case, 2, env={"HOROVOD_TIMELINE": str(path), "HOROVOD_TIMELINE_MAX_BYTES": str(cap)})
    text = path.read_text()
    events = json.loads(text)
    assert len(text) < cap + 1024, len(text)
    assert "reached its size cap of 8192 bytes" in events[-1]["name"], events[-1]


def test_a_step_window_records_only_those_steps(tmp_path) -> None:
    """HOROVOD_TIMELINE_STEPS=2:4: the timeline starts as step 2 begins (where a tensor name comes
    again for the second time) and stops as step 4 begins: two steps' collectives, each complete."""
    path = tmp_path / "window.json"

    def case() -> None:
        hvd.init()
        for step in range(6):
            hvd.allreduce(np.full(8, step, np.float32), name="grad.a")
            hvd.allreduce(np.full(8 << 16, step, np.float32), name="grad.b")  # large: not inline

    run_cluster(case, 2, env={"HOROVOD_TIMELINE": str(path), "HOROVOD_TIMELINE_STEPS": "2:4"})
    events = json.loads(path.read_text())
    rows = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    begun: dict[str, list[str]] = {}
    for e in events:
        if e["ph"] == "B":
            begun.setdefault(rows[e["pid"]], []).append(e["name"])
    assert sorted(begun) == ["grad.a", "grad.b"], begun
    for tensor, activities in begun.items():  # negotiations reach past both ends: left out
        moved = [a for a in activities if not a.startswith("NEGOTIATE")]
        assert len(moved) == 2 and moved[0] == moved[1], (tensor, activities)
    assert sum(e["ph"] == "B" for e in events) == sum(e["ph"] == "E" for e in events)


def test_a_step_window_is_checked() -> None:
    assert timeline_steps("10:20") == (10, 20) and timeline_steps("3:") == (3, -1) and timeline_steps(None) == (0, -1)
    for bad in ("4:2", "5", "a:b", "-1:3", "2:2"):
        with pytest.raises(ValueError, match=r"HOROVOD_TIMELINE_STEPS=.* is not a window of steps: expected A:B"):
            timeline_steps(bad)


def test_a_callers_wait_is_on_the_tensors_row(tmp_path) -> None:
    """The framework's synchronize: where the caller blocks on a result (rank 1 is late, so rank 0
    waits for it), an instant SYNCHRONIZE on the tensor's row says how long."""
    path = tmp_path / "synchronize.json"

    def case() -> None:
        hvd.init()
        if hvd.rank() == 1:
            time.sleep(0.3)
        hvd.synchronize(hvd.allreduce_async(np.ones(8 << 16, np.float32), name="late"))

    run_cluster(case, 2, env={"HOROVOD_TIMELINE": str(path)})
    events = json.loads(path.read_text())
    rows = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    waits = [e for e in events if e.get("name") == "SYNCHRONIZE"]
    assert [rows[e["pid"]] for e in waits] == ["late"], waits
    ends = [e["ts"] for e in events if e["ph"] == "E" and rows.get(e["pid"]) == "late"]
    assert waits[0]["args"]["waited_us"] > 0 and waits[0]["ts"] < max(ends), (waits, ends)  # from before the op's end
