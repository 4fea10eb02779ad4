"""Resource hygiene of long jobs, through horovodrun: init()/shutdown() 20 times in a row leaves no
thread, file descriptor or memory behind, and 20,000 fused allreduce rounds do not grow resident
memory. The bounds are generous (allocator noise), far below what a per-round leak would add.
"""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from conftest import horovodrun, python_ranks

pytestmark = pytest.mark.timeout(420)

KIB_PER_MIB = 1024
#: Allowed growth of resident memory across 19 init/shutdown cycles (after the first).
CYCLES_RSS_BOUND_KIB = 2 * KIB_PER_MIB
#: Allowed growth across 20,000 rounds of 8 allreduces (a leak of 8 bytes per tensor would be 1.2 MiB).
ROUNDS_RSS_BOUND_KIB = 1 * KIB_PER_MIB

MEASURE = textwrap.dedent(
    """\
    import json, os, time
    import numpy as np
    import horovod.common as hvd

    def usage():
        with open("/proc/self/status") as f:
            rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        return {"threads": len(os.listdir("/proc/self/task")), "fds": len(os.listdir("/proc/self/fd")), "rss_kib": rss}

    def usage_after_shutdown(threads_before):
        # A thread that shutdown() has joined can still be listed in /proc/self/task for a moment,
        # until the kernel has reaped it: wait (at most 1 s) for the count to settle.
        deadline = time.monotonic() + 1.0
        while len(os.listdir("/proc/self/task")) > threads_before and time.monotonic() < deadline:
            time.sleep(0.01)
        return usage()

    before = usage()
    cycles = []
    for cycle in range(20):
        hvd.init()
        running = usage()
        assert hvd.allreduce(np.ones(3), name="cycle", op=hvd.Sum).tolist() == [hvd.size()] * 3
        hvd.shutdown()
        cycles.append(usage_after_shutdown(before["threads"]))

    hvd.init()
    tensors = [np.full(1024, i, np.float32) for i in range(8)]
    expected = [np.full(1024, i * hvd.size(), np.float32) for i in range(8)]

    def fused_round():
        handles = [hvd.allreduce_async(t, name=f"grad.{i}", op=hvd.Sum) for i, t in enumerate(tensors)]
        return [hvd.synchronize(h) for h in handles]

    for _ in range(2000):  # warm-up: caches, allocator pools and buffers reach their steady size
        fused_round()
    warm = usage()
    for _ in range(20000):
        results = fused_round()
    done = usage()
    assert all(np.array_equal(r, e) for r, e in zip(results, expected))
    hvd.shutdown()
    usages = {"before": before, "running": running, "cycles": cycles, "warm": warm, "done": done}
    print("usage " + json.dumps(usages), flush=True)
    """
)


@pytest.mark.parametrize("np_", [2, 3])
def test_reinit_and_long_jobs_leave_nothing_behind(np_: int, job_env: dict[str, str]) -> None:
    result = horovodrun("-np", str(np_), "-H", f"localhost:{np_}", *python_ranks(MEASURE), env=job_env, timeout=400)
    assert result.returncode == 0, result.stdout + result.stderr
    reports = {}
    for line in result.stdout.splitlines():
        found = re.match(r"\[(\d+)\]<stdout>:usage (.*)", line)
        if found:
            reports[int(found.group(1))] = json.loads(found.group(2))
    assert sorted(reports) == list(range(np_)), result.stdout
    for rank, usage in reports.items():
        before, running, cycles = usage["before"], usage["running"], usage["cycles"]
        # The engine's thread exists while running and is joined by shutdown(); its sockets closed.
        assert running["threads"] > before["threads"], usage
        for after in cycles:
            assert after["threads"] == before["threads"], (rank, usage)
            assert after["fds"] == before["fds"], (rank, usage)
        grown = cycles[-1]["rss_kib"] - cycles[0]["rss_kib"]
        assert grown < CYCLES_RSS_BOUND_KIB, f"rank {rank}: {grown} KiB more after 19 init/shutdown cycles"
        grown = usage["done"]["rss_kib"] - usage["warm"]["rss_kib"]
        assert grown < ROUNDS_RSS_BOUND_KIB, f"rank {rank}: {grown} KiB more after 20,000 fused rounds"
