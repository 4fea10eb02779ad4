"""What each Spark task of ``horovod.spark.run`` does: one Horovod rank.

The task (in Spark's Python worker, on an executor) announces its host to the driver through the
job's rendezvous server, waits for its rank's environment, and runs the rank as a child process
(:class:`~horovod.spark.rank_child.RankChild`). The rank's result or traceback comes back as the
task's value. The task never raises for the rank's failure: a failed barrier task would make Spark
retry the whole stage, rerunning every rank's training.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
from collections.abc import Callable, Iterator
from typing import Any

from horovod.spark import keys
from horovod.spark.rank_child import RankChild

#: What a task returns: (rank, "ok" with the pickled result | "error" with the traceback text).
Outcome = tuple[int, str, bytes]


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

    def client(self) -> Any:
        from horovod.runner.rendezvous.client import RendezvousClient

        return RendezvousClient(self.addr, self.port, self.secret)

    def environment(self, job_env: dict[str, str]) -> dict[str, str]:
        """A rank's environment: the executor's own, the caller's ``env``, then the job's, with this
        host's cores shared among its ranks' intra-op threads (as horovodrun does)."""
        from horovod.runner import threads

        return threads.apply({**os.environ, **(self.env or {}), **job_env}, threads.host_cores())


def announce(client: Any, job_key: str, task: str) -> None:
    """Tells the driver that this task runs, and on which host."""
    client.set(keys.task(job_key, task), json.dumps({"host": socket.gethostname(), "pid": os.getpid()}).encode())


def rank_task(spec: TaskSpec) -> Callable[[Iterator[Any]], Iterator[Outcome]]:
    """The function each barrier task runs (``rdd.barrier().mapPartitions(...)``)."""

    def run_partition(_: Iterator[Any]) -> Iterator[Outcome]:
        from pyspark import BarrierTaskContext

        partition = BarrierTaskContext.get().partitionId()
        client = spec.client()
        try:
            announce(client, spec.job_key, str(partition))
            raw = client.get(keys.environment(spec.job_key, partition), timeout=spec.start_timeout_s)
            if raw is None:  # the driver gave up on the job (start timeout): nothing to run
                yield (-1, "error", f"task {partition}: no rank assigned within {spec.start_timeout_s:g} s".encode())
                return
            job_env = json.loads(raw)
            rank = int(job_env["HOROVOD_RANK"])
            child = RankChild(spec.func_pickle, spec.environment(job_env), client, keys.output(spec.job_key, rank, ""))
            try:
                status, _rank, payload = child.outcome(child.wait())
            finally:
                child.cleanup()
            yield rank, "ok" if status == "ok" else "error", payload
        finally:
            client.close()

    return run_partition
