"""What each Spark task of ``horovod.spark.run`` does: one Horovod rank.

The task (in Spark's Python worker, on an executor) announces its host to the driver through the
job's rendezvous server, waits for its rank's environment, and runs the rank as a child process
(``python -m horovod.runner.task_fn``, as ``horovod.run`` does): the rank gets a clean environment
and engine of its own, Spark's worker process (which Spark reuses for later tasks) is never left
with Horovod initialised in it, and a rank that crashes is reported instead of taking the worker
with it. The rank's output goes to the driver; its result or traceback comes back as the task's
value. The task never raises for the rank's failure: a failed barrier task would make Spark retry
the whole stage, rerunning every rank's training.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from typing import IO, Any

from horovod.spark import keys

#: What a task returns: (rank, "ok" with the pickled result | "error" with the traceback text).
Outcome = tuple[int, str, bytes]

#: Seconds between the output chunks a rank's stream sends to the driver.
OUTPUT_FLUSH_S = 0.1
#: A chunk is sent at once when it holds this many bytes (well under the server's value limit).
OUTPUT_CHUNK_BYTES = 64 * 1024


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """Everything a task needs, shipped in the Spark job's closure."""

    job_key: str
    addr: str
    port: int
    secret: bytes
    start_timeout_s: float
    func_pickle: bytes  # cloudpickle of (fn, args, kwargs)
    env: dict[str, str] | None  # the caller's ``env``, laid over the executor's own environment


def rank_task(spec: TaskSpec) -> Callable[[Iterator[Any]], Iterator[Outcome]]:
    """The function each barrier task runs (``rdd.barrier().mapPartitions(...)``)."""

    def run_partition(_: Iterator[Any]) -> Iterator[Outcome]:
        from pyspark import BarrierTaskContext

        from horovod.runner.rendezvous.client import RendezvousClient

        partition = BarrierTaskContext.get().partitionId()
        client = RendezvousClient(spec.addr, spec.port, spec.secret)
        try:
            about = {"host": socket.gethostname(), "pid": os.getpid()}
            client.set(keys.task(spec.job_key, partition), json.dumps(about).encode())
            raw = client.get(keys.environment(spec.job_key, partition), timeout=spec.start_timeout_s)
            if raw is None:  # the driver gave up on the job (start timeout): nothing to run
                yield (-1, "error", f"task {partition}: no rank assigned within {spec.start_timeout_s:g} s".encode())
                return
            job_env = json.loads(raw)
            yield _run_rank(spec, job_env, client)
        finally:
            client.close()

    return run_partition


def _run_rank(spec: TaskSpec, job_env: dict[str, str], client: Any) -> Outcome:
    from horovod.runner.task_fn import error_path, result_path

    rank = int(job_env["HOROVOD_RANK"])
    env = dict(os.environ)
    env.update(spec.env or {})
    env.update(job_env)
    directory = tempfile.mkdtemp(prefix="hvd-spark-")
    try:
        with open(os.path.join(directory, "func.pkl"), "wb") as f:
            f.write(spec.func_pickle)
        with open(os.path.join(directory, "sys_path.json"), "w", encoding="utf-8") as f:
            json.dump([p for p in sys.path if p], f)
        code = _run_child([sys.executable, "-m", "horovod.runner.task_fn", directory], env, rank, spec, client)
        result = result_path(directory, rank)
        if code == 0 and os.path.exists(result):
            with open(result, "rb") as f:
                return rank, "ok", f.read()
        error = error_path(directory, rank)
        if os.path.exists(error):
            with open(error, "rb") as f:
                return rank, "error", f.read()
        return rank, "error", _how_it_ended(code).encode()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _how_it_ended(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"the rank's process was killed by signal {signal.Signals(-code).name}"
    return f"the rank's process exited with status {code} without a result"


def _die_with_parent() -> None:
    """In the child, before exec: killed when the task's thread that started it ends (Spark killed
    the task's worker), so that no rank outlives its task."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    os.setsid()  # its own process group, stopped as one


def _run_child(argv: list[str], env: dict[str, str], rank: int, spec: TaskSpec, client: Any) -> int:
    child = subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_die_with_parent,
        close_fds=True,
    )
    assert child.stdout is not None and child.stderr is not None
    pumps = [
        threading.Thread(target=_forward, args=(pipe, keys.output(spec.job_key, rank, name), client), daemon=True)
        for pipe, name in ((child.stdout, "stdout"), (child.stderr, "stderr"))
    ]
    for pump in pumps:
        pump.start()
    try:
        code = child.wait()
    finally:
        if child.poll() is None:  # the task itself is being stopped
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    for pump in pumps:
        pump.join(timeout=10)
    return code


def _forward(pipe: IO[bytes], key: str, client: Any) -> None:
    """Sends the rank's stream to the driver in chunks of whole lines, at most every OUTPUT_FLUSH_S."""
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
