"""A rank (or elastic worker) run by a Spark task as a child process: ``python -m
horovod.runner.task_fn <dir>``, as ``horovod.run`` runs its ranks.

The child gets a clean environment and an engine of its own, Spark's Python worker (which Spark
reuses for later tasks) is never left with Horovod initialised in it, and a child that crashes is
reported instead of taking the worker with it. Its output goes to the driver through the rendezvous
server in chunks of whole lines; its result or traceback is read from the files ``task_fn`` writes.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from typing import IO, Any

#: Seconds between the output chunks a child's stream sends to the driver.
OUTPUT_FLUSH_S = 0.1
#: A chunk is sent at once when it holds this many bytes (well under the server's value limit).
OUTPUT_CHUNK_BYTES = 64 * 1024


def _die_with_parent() -> None:
    """In the child, before exec: killed when the task's thread that started it ends (Spark killed
    the task's worker), so that no rank outlives its task; and a process group of its own."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    os.setsid()


def how_it_ended(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"its process was killed by signal {signal.Signals(-code).name}"
    return f"its process exited with status {code} without a result"


class RankChild:
    """One child process running ``fn`` (pickled in ``func_pickle``) with ``env``; its output sent
    under ``output_key`` + ``stdout``/``stderr`` through ``client``."""

    def __init__(self, func_pickle: bytes, env: dict[str, str], client: Any, output_key: str) -> None:
        self.directory = tempfile.mkdtemp(prefix="hvd-spark-")
        with open(os.path.join(self.directory, "func.pkl"), "wb") as f:
            f.write(func_pickle)
        with open(os.path.join(self.directory, "sys_path.json"), "w", encoding="utf-8") as f:
            json.dump([p for p in sys.path if p], f)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "horovod.runner.task_fn", self.directory],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent,
            close_fds=True,
        )
        assert self._proc.stdout is not None and self._proc.stderr is not None
        self._pumps = [
            threading.Thread(target=_forward, args=(pipe, output_key + name, client), daemon=True)
            for pipe, name in ((self._proc.stdout, "stdout"), (self._proc.stderr, "stderr"))
        ]
        for pump in self._pumps:
            pump.start()

    def signal(self, sig: int) -> None:
        """Signals the child's whole process group (what it started too)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, sig)

    def wait(self) -> int:
        """The child's return code (negative: the signal that killed it), its output all sent."""
        try:
            code = self._proc.wait()
        finally:
            if self._proc.poll() is None:  # the task itself is being stopped
                self.signal(signal.SIGKILL)
                self._proc.wait()
        for pump in self._pumps:
            pump.join(timeout=10)
        return code

    def outcome(self, code: int) -> tuple[str, int, bytes]:
        """``("ok", rank, pickled result)``, ``("error", rank or -1, traceback)``, or ``("left", -1,
        b"")`` for an elastic worker the driver sent away (it leaves no file)."""
        results = glob.glob(os.path.join(self.directory, "result.*.pkl"))
        if code == 0 and results:
            rank = os.path.basename(results[0]).split(".")[1]
            with open(results[0], "rb") as f:
                return "ok", int(rank), f.read()
        errors = glob.glob(os.path.join(self.directory, "error.*.txt"))
        if errors:
            name = os.path.basename(errors[0]).split(".")[1]
            with open(errors[0], "rb") as f:
                return "error", int(name) if name.isdigit() else -1, f.read()
        if code == 0:
            return "left", -1, b""
        return "error", -1, how_it_ended(code).encode()

    def cleanup(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def _forward(pipe: IO[bytes], key: str, client: Any) -> None:
    """Sends the child's stream to the driver in chunks of whole lines, at most every OUTPUT_FLUSH_S."""
    pending: list[bytes] = []
    lock = threading.Lock()
    done = threading.Event()

    def flush() -> None:
        with lock:
            data = b"".join(pending)
            pending.clear()
        if data:
            with contextlib.suppress(Exception):  # a lost line of output must not fail the rank
                client.set(key, data)

    def flusher() -> None:
        while not done.wait(OUTPUT_FLUSH_S):
            flush()

    timer = threading.Thread(target=flusher, daemon=True)
    timer.start()
    try:
        for line in iter(pipe.readline, b""):
            with lock:
                pending.append(line)
                full = sum(map(len, pending)) >= OUTPUT_CHUNK_BYTES
            if full:
                flush()
    finally:
        done.set()
        timer.join()
        flush()
        pipe.close()
