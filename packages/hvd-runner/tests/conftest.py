"""Helpers for hvd-runner's tests.

Multi-process tests need a backend that connects processes. ``HVD_TEST_BACKEND`` names it; by
default "gloo" when hvd-backend-gloo is installed, else "example" (examples/hvd-backend-example,
slow but transport-free: it moves data through the rendezvous store).
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

import pytest

# The session's cluster of network-namespace hosts (the netns_cluster fixture), for multi-host tests.
pytest_plugins = ["cluster_fixtures"]

#: Seconds any one launched job may take before the test fails (the job is killed then).
JOB_TIMEOUT_S = 120


def _installed_backends() -> set[str]:
    from horovod.common.plugin_api import get_plugin_manager
    from horovod.common.testing.probes import reset_plugins

    try:
        return {n for n, s in get_plugin_manager().backends().items() if not s.in_process_only}
    finally:
        reset_plugins()


def chosen_backend() -> str:
    chosen = os.environ.get("HVD_TEST_BACKEND", "").strip()
    if chosen:
        return chosen
    installed = _installed_backends()
    return "gloo" if "gloo" in installed else "example"


@pytest.fixture(scope="session")
def backend() -> str:
    name = chosen_backend()
    if name not in _installed_backends():
        pytest.fail(
            f"test backend {name!r} is not installed (HVD_TEST_BACKEND={os.environ.get('HVD_TEST_BACKEND', '')!r}); "
            "install hvd-backend-gloo, or examples/hvd-backend-example"
        )
    return name


@pytest.fixture
def job_env(backend: str) -> dict[str, str]:
    """The environment for launching jobs: this one, with the test backend selected."""
    env = dict(os.environ)
    for key in list(env):
        if key.startswith("HOROVOD_"):
            del env[key]
    env["HOROVOD_CPU_OPERATIONS"] = backend
    return env


def horovodrun_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "horovod.runner.launch", *args]


def horovodrun(
    *args: str, env: dict[str, str] | None = None, timeout: float = JOB_TIMEOUT_S, cwd: str | Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs horovodrun to its end and returns its exit status and (text) output."""
    return subprocess.run(
        horovodrun_argv(*args),
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def python_ranks(code: str) -> list[str]:
    """The command that runs ``code`` on each rank (this interpreter: the test's environment)."""
    return [sys.executable, "-c", code]


class LineReader:
    """Collects a stream's lines in a thread, so a test can wait for a given line with a deadline."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, predicate: Callable[[list[str]], bool], timeout: float = 60.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while not predicate(self.lines):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out waiting for output; got {self.lines}")
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                if not predicate(self.lines):
                    raise AssertionError(f"stream closed before the expected output; got {self.lines}")
                break
            self.lines.append(line)
        return self.lines

    def rest(self, timeout: float = 30.0) -> list[str]:
        """Every line until the stream closes."""
        self._thread.join(timeout)
        while True:
            try:
                line = self._queue.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.lines.append(line)
        return self.lines


def reported_pids(lines: Iterable[str], tag: str = "pid") -> list[int]:
    """Pids printed by ranks as ``<tag> <pid>`` (after the launcher's prefix)."""
    pids = []
    for line in lines:
        text = line.split(":", 1)[1] if ">:" in line else line
        parts = text.split()
        if len(parts) == 2 and parts[0] == tag and parts[1].isdigit():
            pids.append(int(parts[1]))
    return pids


def assert_all_gone(pids: Iterable[int], timeout: float = 10.0) -> None:
    """Every pid has exited (a zombie waiting for init to reap it counts as gone)."""
    import psutil

    deadline = time.monotonic() + timeout
    alive: list[int] = []
    while True:
        alive = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not alive, f"processes still alive after the launcher exited: {alive}"


#: A rank's allreduces of many sizes, dtypes and ops, and a fused batch, summed up in one digest,
#: with the number of allreduces the engine did host by host (HOROVOD_HIERARCHICAL_ALLREDUCE).
HIERARCHICAL = textwrap.dedent(
    """\
    import hashlib, numpy as np, horovod.common as hvd
    from horovod.common.testing.probes import engine_stats
    hvd.init()
    r, s = hvd.rank(), hvd.size()
    digest = hashlib.sha256()
    rng = np.random.default_rng(r)
    for n in (0, 1, 3, 1000, 65537):
        for dtype in (np.float32, np.float64, np.int32, np.int64):
            x = rng.integers(-1000, 1000, n).astype(dtype)  # integers: exact in any order of summation
            for op in (hvd.Sum, hvd.Max, hvd.Min, hvd.Average):
                if op is hvd.Average and dtype in (np.int32, np.int64):
                    continue
                digest.update(hvd.allreduce(x, op=op, name=f"{n}.{np.dtype(dtype).name}.{op}").tobytes())
    handles = [hvd.allreduce_async(np.full(7 + i, r + i, np.float32), name=f"fused.{i}") for i in range(16)]
    for h in handles:
        digest.update(hvd.synchronize(h).tobytes())
    print(f"rank {r} digest {digest.hexdigest()} hierarchical {engine_stats()['hierarchical_allreduces']}", flush=True)
    hvd.shutdown()
    """
)


def run_twice_and_compare_digests(run: Callable[[list[str]], subprocess.CompletedProcess[str]]) -> None:
    """Runs HIERARCHICAL flat, then with --hierarchical-allreduce (``run`` takes horovodrun's
    arguments after the hosts): every rank gets the same results both times, and the second run
    really went host by host."""
    digests = {}
    for hierarchical in (False, True):
        result = run([*(["--hierarchical-allreduce"] if hierarchical else []), *python_ranks(HIERARCHICAL)])
        assert result.returncode == 0, result.stdout + result.stderr
        lines = [line.split(":", 1)[1] for line in result.stdout.splitlines() if ">:rank " in line]
        assert lines, result.stdout
        digests[hierarchical] = {line.split()[3] for line in lines}
        used = {int(line.split()[5]) for line in lines}
        assert (min(used) > 0) if hierarchical else (used == {0}), result.stdout
    assert len(digests[False]) == 1, digests  # every rank has the same results...
    assert digests[True] == digests[False]  # ...and the same as without the hierarchy
