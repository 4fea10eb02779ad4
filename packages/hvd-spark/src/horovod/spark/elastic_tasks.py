"""The Spark tasks of an elastic job, as the elastic driver sees them: hosts with slots, and the
processes of the workers they run.

A task is alive while its heartbeat comes (``TASK_TIMEOUT_S``); the hosts are those of the alive
tasks, with a slot per task. A worker started on a host goes to an idle task there; its end is the
exit its task reports, or, when the task itself is lost (its executor died), a kill.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable

from horovod.runner.elastic.discovery import HostDiscovery
from horovod.spark import keys

#: Seconds without a heartbeat after which a task (and the worker it runs) counts as lost.
TASK_TIMEOUT_S = 10.0
#: What a worker whose task was lost ended with: as if killed (SIGKILL).
LOST = -9


@dataclasses.dataclass
class _Task:
    host: str
    last_seen: float
    worker: int | None = None  # the worker it runs now
    commands: int = 0  # commands sent to it so far (the next one's sequence number)


class SparkTasks(HostDiscovery):
    def __init__(self, job_key: str, publish: Callable[[str, bytes], None]) -> None:
        self._job_key = job_key
        self._publish = publish
        self._tasks: dict[str, _Task] = {}
        self._exits: dict[int, int] = {}  # worker id -> return code
        self._changed = threading.Condition()

    def _alive(self, task: _Task, now: float) -> bool:
        return now - task.last_seen < TASK_TIMEOUT_S

    # --- what the tasks send --------------------------------------------------------------------

    def announced(self, task: str, value: bytes) -> None:
        with self._changed:
            self._tasks[task] = _Task(json.loads(value)["host"], time.monotonic())
            self._changed.notify_all()

    def beat(self, task: str) -> None:
        with self._changed:
            if task in self._tasks:
                self._tasks[task].last_seen = time.monotonic()

    def worker_exited(self, worker_id: int, value: bytes) -> None:
        with self._changed:
            self._exits[worker_id] = int(json.loads(value)["code"])
            for task in self._tasks.values():
                if task.worker == worker_id:
                    task.worker = None
            self._changed.notify_all()

    # --- the driver's side ----------------------------------------------------------------------

    def find_available_hosts_and_slots(self) -> dict[str, int]:
        now = time.monotonic()
        with self._changed:
            hosts: dict[str, int] = {}
            for task in self._tasks.values():
                if self._alive(task, now):
                    hosts[task.host] = hosts.get(task.host, 0) + 1
            return hosts

    def start(self, worker_id: int, host: str, env: dict[str, str]) -> str:
        """Sends worker ``worker_id`` to an idle task on ``host``; returns the task's id."""
        now = time.monotonic()
        with self._changed:
            idle = [
                t
                for t, task in self._tasks.items()
                if task.host == host and task.worker is None and self._alive(task, now)
            ]
            if not idle:
                raise RuntimeError(f"no idle Spark task on host {host} for worker {worker_id}")
            task_id = sorted(idle)[0]
            task = self._tasks[task_id]
            task.worker = worker_id
            seq, task.commands = task.commands, task.commands + 1
        command = {"worker_id": worker_id, "env": env}
        self._publish(keys.command(self._job_key, task_id, seq), json.dumps(command).encode())
        return task_id

    def wait_exit(self, worker_id: int, task_id: str) -> int:
        """The worker's return code, once its task reports it; LOST when the task stops beating."""
        with self._changed:
            while worker_id not in self._exits:
                if not self._alive(self._tasks[task_id], time.monotonic()):
                    self._tasks[task_id].worker = None
                    return LOST
                self._changed.wait(timeout=1.0)
            return self._exits[worker_id]


class TaskWorkerProcess:
    """A worker run by a Spark task, seen as the driver sees a worker's process."""

    host: str | None = None  # no ssh: the task runs it
    pid = 0

    def __init__(self, job_key: str, worker_id: int, publish: Callable[[str, bytes], None]) -> None:
        self._job_key = job_key
        self._worker_id = worker_id
        self._publish = publish

    def terminate(self) -> None:
        self._publish(keys.signal(self._job_key, self._worker_id, "TERM"), b"1")

    def kill(self) -> None:
        self._publish(keys.signal(self._job_key, self._worker_id, "KILL"), b"1")

    def stopped(self) -> bool:
        return False
