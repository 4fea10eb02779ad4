"""What each Spark task of ``horovod.spark.run_elastic`` does: a slot that runs elastic workers.

The task announces itself (its host) and then, until the driver marks the job done, runs the
workers the driver sends it, one at a time, each as a child process (a worker that failed is
replaced, often in the same task). While it lives it sends a heartbeat, so that the driver sees a
task lost with its executor within seconds. Each worker's end is reported to the driver at once;
the results come back as the task's value when the job is done.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

from horovod.spark import keys
from horovod.spark.rank_child import RankChild
from horovod.spark.task import TaskSpec, announce

#: Seconds between a task's heartbeats.
HEARTBEAT_S = 1.0
#: Seconds a task waits for a command before looking whether the job is done.
COMMAND_POLL_S = 1.0

#: A finished worker: (worker id, "ok" | "error" | "left", its rank in the last world it joined, payload).
WorkerOutcome = tuple[int, str, int, bytes]


def _heartbeat(client: Any, key: str, stop: threading.Event) -> None:
    while not stop.wait(HEARTBEAT_S):
        with contextlib.suppress(Exception):  # the driver is gone or busy: the next beat may pass
            client.set(key, b"1")


def _take_signals(client: Any, job_key: str, worker_id: int, child: RankChild, ended: threading.Event) -> None:
    """Applies the driver's TERM and KILL for this worker to its child, until the child ends."""
    pending = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL}
    while pending and not ended.is_set():
        for name in list(pending):
            with contextlib.suppress(Exception):
                if client.get(keys.signal(job_key, worker_id, name), timeout=0.25) is not None:
                    child.signal(pending.pop(name))


def _run_worker(spec: TaskSpec, client: Any, command: dict[str, Any]) -> WorkerOutcome:
    worker_id = int(command["worker_id"])
    child = RankChild(
        spec.func_pickle, spec.environment(command["env"]), client, keys.output(spec.job_key, worker_id, "")
    )
    ended = threading.Event()
    watcher = threading.Thread(target=_take_signals, args=(client, spec.job_key, worker_id, child, ended), daemon=True)
    watcher.start()
    try:
        code = child.wait()
        ended.set()
        status, rank, payload = child.outcome(code)
    finally:
        child.cleanup()
    client.set(keys.worker_exit(spec.job_key, worker_id), json.dumps({"code": code}).encode())
    watcher.join()
    return worker_id, status, rank, payload


def elastic_task(spec: TaskSpec) -> Callable[[Iterator[Any]], Iterator[WorkerOutcome]]:
    """The function each task runs (``rdd.mapPartitions(...)``, not barrier: tasks come and go)."""

    def run_partition(_: Iterator[Any]) -> Iterator[WorkerOutcome]:
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None  # inside a Spark task
        task = f"{context.partitionId()}.{context.attemptNumber()}"
        job_key = spec.job_key
        client = spec.client()
        outcomes: list[WorkerOutcome] = []
        stop = threading.Event()
        try:
            if client.get(keys.done(job_key), timeout=0) is not None:
                return  # started after the job ended (Spark had no slot for it before)
            beat = threading.Thread(target=_heartbeat, args=(client, keys.alive(job_key, task), stop), daemon=True)
            beat.start()
            announce(client, job_key, task)
            for raw in _commands(client, job_key, task):
                command = json.loads(raw)
                if command.get("stop"):
                    break
                outcomes.append(_run_worker(spec, client, command))
        finally:
            stop.set()
            client.close()
        yield from outcomes

    return run_partition


def _commands(client: Any, job_key: str, task: str) -> Iterator[bytes]:
    """The driver's commands to this task, in order, until the job is done."""
    seq = 0
    while True:
        raw = client.get(keys.command(job_key, task, seq), timeout=COMMAND_POLL_S)
        if raw is not None:
            seq += 1
            yield raw
        elif client.get(keys.done(job_key), timeout=0) is not None:
            return
