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
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

import pytest

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
