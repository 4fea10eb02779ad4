"""The driver side of ``horovod.spark.run``: one Spark barrier job whose tasks are the ranks.

The driver starts the job's authenticated rendezvous server, runs ``num_proc`` barrier tasks (Spark
starts them all at once or refuses at once, so a job never waits for slots that other ranks hold),
waits for every task to say which host it runs on, places the ranks host by host (local ranks count
the ranks of one host) and hands each task its rank's environment through the server. While the job
runs it prints the ranks' output and watches their failure reports: once a rank has failed, the
others get ``FAILURE_GRACE_S`` to end (their collectives fail at once, naming it) before the Spark
job is cancelled.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from horovod.runner import exit_report, job_report
from horovod.runner.hosts import ranks_by_host
from horovod.runner.job import placement_environment
from horovod.runner.output import OutputRouter
from horovod.runner.rendezvous.job import JobRendezvous
from horovod.spark import keys
from horovod.spark.task import TaskSpec, rank_task

#: Seconds the other ranks get, once one has failed, to end by themselves before the job is cancelled.
FAILURE_GRACE_S = 30.0
#: Seconds to wait for a cancelled Spark job to end.
CANCEL_WAIT_S = 60.0


class RankFailed(RuntimeError):
    """A rank of ``horovod.spark.run`` raised or died; names the rank, and holds its traceback.

    :param rank: the rank that failed (also the ``rank`` attribute).
    :param message: the error's message.
    :param remote_traceback: the rank's traceback, as text (also the ``remote_traceback`` attribute; empty when it died
        without one).
    """

    def __init__(self, rank: int, message: str, remote_traceback: str = "") -> None:
        super().__init__(message)
        self.rank = rank
        self.remote_traceback = remote_traceback


class SparkJobThread(threading.Thread):
    """Runs the Spark job of ``num_tasks`` tasks (``collect`` blocks) so that the driver can watch it
    meanwhile; in barrier mode for ``horovod.spark.run``, where every rank must run at once."""

    def __init__(self, sc: Any, num_tasks: int, task_fn: Any, group: str, *, barrier: bool) -> None:
        super().__init__(name="hvd-spark-job", daemon=True)
        self._sc = sc
        self._num_tasks = num_tasks
        self._task_fn = task_fn
        self._barrier = barrier
        self.group = group
        self.outcomes: list[Any] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            # Job groups are per thread (pyspark's pinned thread mode): this one is cancellable alone.
            self._sc.setJobGroup(self.group, "horovod.spark", interruptOnCancel=True)
            rdd = self._sc.parallelize(range(self._num_tasks), self._num_tasks)
            rdd = rdd.barrier() if self._barrier else rdd
            self.outcomes = rdd.mapPartitions(self._task_fn).collect()
        except BaseException as error:  # handed to the driver's thread
            self.error = error

    def cancel(self) -> None:
        self._sc.cancelJobGroup(self.group)
        self.join(timeout=CANCEL_WAIT_S)


class OutputPipes:
    """The ranks' output, arriving in chunks through the server, fed to an OutputRouter by pipes."""

    def __init__(self, router: OutputRouter) -> None:
        self._router = router
        self._pipes: dict[tuple[int, str], IO[bytes]] = {}
        self._lock = threading.Lock()

    def write(self, rank: int, stream: str, data: bytes) -> None:
        with self._lock:
            pipe = self._pipes.get((rank, stream))
            if pipe is None:
                read_fd, write_fd = os.pipe()
                self._router.attach(rank, stream, os.fdopen(read_fd, "rb"))
                pipe = self._pipes[(rank, stream)] = os.fdopen(write_fd, "wb")
            with contextlib.suppress(OSError):
                pipe.write(data)
                pipe.flush()

    def close(self) -> None:
        with self._lock:
            for pipe in self._pipes.values():
                with contextlib.suppress(OSError):
                    pipe.close()
            self._pipes.clear()
        self._router.join(timeout=10)
        self._router.close()


class SparkJob:
    """One ``horovod.spark.run`` job, from the server's start to the results."""

    def __init__(
        self,
        sc: Any,
        num_proc: int,
        *,
        host: str,
        nics: list[str] | None,
        start_timeout_s: float,
        gloo_timeout_s: int,
        output: OutputRouter,
        log: Callable[[str], None],
    ) -> None:
        self._sc = sc
        self._num_proc = num_proc
        self._start_timeout_s = start_timeout_s
        self._log = log
        self._output = OutputPipes(output)
        self._changed = threading.Condition()
        self._hosts: dict[int, str] = {}  # partition -> host
        self._failures: list[tuple[float, int, str]] = []  # (when, rank, reason), primary reports
        self._reporters: set[int] = set()  # ranks that reported their end, failing or not
        self._rendezvous = JobRendezvous(
            host,
            nics,
            gloo_timeout_s,
            job_prefix="hvd-spark",
            on_set=self._on_set,
            transient_prefix=keys.STREAM,
        )

    # --- what the tasks and ranks send --------------------------------------------------------

    def _on_set(self, key: str, value: bytes) -> None:
        job_key = self._rendezvous.job_key
        stream = keys.parse_output(job_key, key)
        if stream is not None:
            self._output.write(stream[0], stream[1], value)
            return
        task = keys.parse_task(job_key, key)
        if task is not None and task.isdigit():
            with self._changed:
                self._hosts[int(task)] = json.loads(value)["host"]
                self._changed.notify_all()
            return
        prefix = exit_report.key_prefix(job_key)
        if key.startswith(prefix) and key[len(prefix) :].isdigit():
            reason, primary = exit_report.decode(value)
            with self._changed:
                self._reporters.add(int(key[len(prefix) :]))
                if primary and reason != exit_report.EXITING:
                    self._failures.append((time.monotonic(), int(key[len(prefix) :]), reason))
                    self._changed.notify_all()

    # --- the job ------------------------------------------------------------------------------

    def run(self, func_pickle: bytes, env: dict[str, str] | None) -> list[Any]:
        try:
            spec = TaskSpec(
                job_key=self._rendezvous.job_key,
                addr=self._rendezvous.server.host,
                port=self._rendezvous.server.port,
                secret=self._rendezvous.secret,
                start_timeout_s=self._start_timeout_s,
                func_pickle=func_pickle,
                env=env,
            )
            job = SparkJobThread(self._sc, self._num_proc, rank_task(spec), self._rendezvous.job_key, barrier=True)
            job.start()
            hosts = self._wait_for_tasks(job)
            placements = ranks_by_host([hosts[p] for p in range(self._num_proc)])
            self._log(
                "ranks by host: "
                + ", ".join(f"{h}: {sum(p.hostname == h for p in placements)}" for h in dict.fromkeys(hosts.values()))
            )
            for partition, placement in enumerate(placements):
                rank_env = placement_environment(self._rendezvous.env, placement)
                self._rendezvous.server.set(keys.environment(spec.job_key, partition), json.dumps(rank_env).encode())
            self._wait_for_end(job)
            self._report()
            return self._results(job)
        finally:
            self._rendezvous.stop()
            self._output.close()

    def _report(self) -> None:
        """The job-end report (:mod:`horovod.runner.job_report`): each rank posted its own as it
        shut Horovod down; the ranks that failed are named with what they reported."""
        with self._changed:
            failures = sorted(self._failures)
        first = failures[0] if failures else None
        job_report.finish(
            self._rendezvous.server.get,
            self._rendezvous.job_key,
            self._num_proc,
            failure=f"rank {first[1]} failed: {first[2]}" if first else None,
            ended={rank: f"failed: {reason}" for _, rank, reason in failures},
            report_file=None,
            quiet=False,
            log=self._log,
        )

    def _wait_for_tasks(self, job: SparkJobThread) -> dict[int, str]:
        deadline = time.monotonic() + self._start_timeout_s
        with self._changed:
            while len(self._hosts) < self._num_proc and job.is_alive() and time.monotonic() < deadline:
                self._changed.wait(timeout=0.2)
            hosts = dict(self._hosts)
        if len(hosts) == self._num_proc:
            return hosts
        if not job.is_alive():
            raise RuntimeError(
                f"horovod.spark.run: Spark could not run {self._num_proc} tasks at once "
                f"(Spark has {self._sc.defaultParallelism} task slots here): {_first_line(job.error)}"
            ) from job.error
        job.cancel()
        raise TimeoutError(
            f"horovod.spark.run: only {len(hosts)} of {self._num_proc} Spark tasks started within "
            f"start_timeout={self._start_timeout_s:g} s (Spark has {self._sc.defaultParallelism} task slots); "
            "give the application more executors or cores, or ask for fewer processes (num_proc)"
        )

    def _wait_for_end(self, job: SparkJobThread) -> None:
        while job.is_alive():
            with self._changed:
                first = self._failures[0] if self._failures else None
            if first is not None and time.monotonic() > first[0] + FAILURE_GRACE_S:
                self._log(f"rank {first[1]} failed {FAILURE_GRACE_S:g} s ago and ranks still run: cancelling the job")
                job.cancel()
                return
            job.join(timeout=0.2)

    def _results(self, job: SparkJobThread) -> list[Any]:
        import cloudpickle

        outcomes = {rank: (status, payload) for rank, status, payload in job.outcomes or [] if rank >= 0}
        failed = sorted(rank for rank, (status, _) in outcomes.items() if status != "ok")
        if failed or len(outcomes) < self._num_proc:
            first = self._culprit(failed)
            text = outcomes[first][1].decode("utf-8", "replace") if first in outcomes else ""
            others = [r for r in failed if r != first]
            reason = _last_line(text) or self._reported_reason(first) or _first_line(job.error)
            message = f"horovod.spark.run: rank {first} failed: {reason}"
            if others:
                message += f" (ranks {others} failed too)"
            if text:
                message += f"\n\nrank {first}'s traceback:\n{text}"
            raise RankFailed(first, message, text) from job.error
        return [cloudpickle.loads(outcomes[rank][1]) for rank in range(self._num_proc)]

    def _reported_reason(self, rank: int) -> str:
        """What ``rank`` reported as it began to fail (its exception), when its result never came
        back (the job was cancelled while other ranks still ran)."""
        with self._changed:
            return next((reason for _, r, reason in sorted(self._failures) if r == rank), "")

    def _culprit(self, failed: list[int]) -> int:
        """The rank that failed first: the first to report a failure of its own (not a Horovod error
        caused by a lost peer), else one that could not report at all (killed), else the lowest."""
        with self._changed:
            primary = [rank for _, rank, _ in sorted(self._failures)]
            silent = [rank for rank in failed if rank not in self._reporters]
        for candidates in (primary, silent, failed):
            if candidates:
                return candidates[0]
        return -1


def _first_line(error: BaseException | None) -> str:
    text = str(error or "").strip()
    return text.splitlines()[0] if text else "the Spark job ended without the ranks' results"


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""
