"""``horovod.spark.run_elastic``: an elastic Horovod job whose workers run in Spark tasks.

The driver is horovodrun's elastic driver (:mod:`horovod.runner.elastic.driver`). Spark runs
``max_num_proc`` tasks (not in barrier mode: tasks may come and go); each is a slot on its host that
runs the workers the driver sends it (:mod:`horovod.spark.elastic_task`). A worker that fails is
replaced, a host whose workers fail twice is blacklisted for a while, and a task lost with its
executor takes its worker with it; ``fn`` uses ``hvd.elastic.run`` as any elastic script does and
goes on from its last commit. The workers' output is prefixed with their worker id.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from horovod.common.plugin_api import elastic_protocol
from horovod.runner import worker_env
from horovod.runner.elastic.driver import DriverSettings, ElasticDriver, WorkerExited
from horovod.runner.elastic.host_manager import HostManager
from horovod.runner.elastic.job import store_watcher
from horovod.runner.output import OutputRouter
from horovod.runner.rendezvous.job import JobRendezvous
from horovod.spark import keys
from horovod.spark.driver import OutputPipes, SparkJobThread
from horovod.spark.elastic_task import elastic_task
from horovod.spark.elastic_tasks import SparkTasks, TaskWorkerProcess
from horovod.spark.runner import DEFAULT_GLOO_TIMEOUT_S, driver_host
from horovod.spark.task import TaskSpec

#: What workers are given as HOROVOD_ELASTIC_TIMEOUT: the driver bounds every world's forming.
_WORKER_WAIT_S = 7 * 24 * 3600
#: Seconds the tasks get to end once the driver marked the job done, before the Spark job is cancelled.
_TASKS_END_S = 60.0


def run_elastic(
    fn: Callable[..., Any],
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    num_proc: int | None = None,
    min_num_proc: int | None = None,
    max_num_proc: int | None = None,
    start_timeout: float | None = None,
    elastic_timeout: float | None = None,
    reset_limit: int | None = None,
    env: Mapping[str, str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    verbose: int = 1,
    nics: Sequence[str] | None = None,
    prefix_output_with_timestamp: bool = False,
    min_np: int | None = None,
    max_np: int | None = None,
    cooldown_range: tuple[int, int] | None = None,
) -> list[Any]:
    """Runs ``fn(*args, **kwargs)`` as an elastic Horovod job on Spark; returns the results of the
    workers of the last world, by rank.

    :param fn: the function each worker runs; it calls ``hvd.init()`` and trains with
        ``hvd.elastic.run`` (state committed, restored after a reset).
    :param args: positional arguments of ``fn``.
    :param kwargs: keyword arguments of ``fn``.
    :param num_proc: workers to start with; defaults to ``spark.default.parallelism``.
    :param min_num_proc: the fewest workers training goes on with (default ``num_proc``); below it
        the job waits up to ``elastic_timeout`` for more. ``min_np`` is the same.
    :param max_num_proc: the most workers (default ``num_proc``): the number of Spark tasks asked
        for, each a slot for one worker at a time. ``max_np`` is the same.
    :param start_timeout: accepted for Horovod's signature; the start is bounded by ``elastic_timeout``.
    :param elastic_timeout: seconds to wait for ``min_num_proc`` workers (``HOROVOD_ELASTIC_TIMEOUT``
        or 600).
    :param reset_limit: the most resets of the world before the job fails (default unlimited).
    :param env: variables laid over each task's own environment for its workers.
    :param stdout: where the workers' standard output is printed (lines prefixed with the worker id).
    :param stderr: the same for standard error.
    :param verbose: 0 quiet; 1 worlds formed and failures; 2 everything the driver decides.
    :param nics: network interfaces the workers use, and on which the driver serves the rendezvous.
    :param prefix_output_with_timestamp: prefix each line of output with the time.
    :param cooldown_range: ``(min, max)`` seconds a blacklisted host waits before it is tried again.
    :raises RuntimeError: with the driver's reason when the job fails.
    :param min_np: Horovod's older name of ``min_num_proc``, which wins when both are given.
    :param max_np: Horovod's older name of ``max_num_proc``, which wins when both are given.
    """
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        raise RuntimeError(
            "horovod.spark.run_elastic needs an active SparkSession: create one with SparkSession.builder"
        )
    sc = spark.sparkContext
    num_proc = sc.defaultParallelism if num_proc is None else num_proc
    low = min_num_proc or min_np or num_proc
    high = max_num_proc or max_np or num_proc
    if not 1 <= low <= num_proc <= high:
        raise ValueError(
            "horovod.spark.run_elastic: need 1 <= min_num_proc <= num_proc <= max_num_proc, "
            f"got {low}, {num_proc}, {high}"
        )
    timeout = float(elastic_timeout or os.environ.get(elastic_protocol.ELASTIC_TIMEOUT) or 600)
    settings = DriverSettings(
        min_np=low, max_np=high, initial_np=num_proc, elastic_timeout_s=timeout, reset_limit=reset_limit
    )
    output = OutputRouter(
        stdout or sys.stdout, stderr or sys.stderr, size=100, prefix_timestamp=prefix_output_with_timestamp
    )
    job = _ElasticSparkJob(sc, high, list(nics or []), output, verbose)
    return job.run(
        fn, tuple(args), dict(kwargs or {}), dict(env) if env is not None else None, settings, cooldown_range
    )


class _ElasticSparkJob:
    def __init__(self, sc: Any, num_tasks: int, nics: list[str], output: OutputRouter, verbose: int) -> None:
        self._sc = sc
        self._num_tasks = num_tasks
        self._verbose = verbose
        self._output = OutputPipes(output)
        self._watch: Callable[[str, bytes], None] = lambda key, value: None
        self._failure = ""
        self._worker_failure = ""  # the driver's last line on a worker that failed
        gloo_timeout = int(os.environ.get("HOROVOD_GLOO_TIMEOUT_SECONDS", DEFAULT_GLOO_TIMEOUT_S))
        self._rendezvous = JobRendezvous(
            driver_host(sc, nics),
            nics,
            gloo_timeout,
            job_prefix="hvd-spark",
            on_set=self._on_set,
            transient_prefix=keys.STREAM,
        )
        self._tasks = SparkTasks(self._rendezvous.job_key, self._rendezvous.server.set)

    def _on_set(self, key: str, value: bytes) -> None:
        job_key = self._rendezvous.job_key
        if (stream := keys.parse_output(job_key, key)) is not None:
            self._output.write(stream[0], stream[1], value)
        elif (task := keys.parse_alive(job_key, key)) is not None:
            self._tasks.beat(task)
        elif (task := keys.parse_task(job_key, key)) is not None:
            self._tasks.announced(task, value)
        elif (worker := keys.parse_worker_exit(job_key, key)) is not None:
            self._tasks.worker_exited(worker, value)
        else:
            self._watch(key, value)  # the elastic protocol: the workers' requests and failure reports

    def _log(self, line: str) -> None:
        if "job failed" in line:
            self._failure = line
        elif line.startswith("elastic: worker ") and ") failed: " in line:
            self._worker_failure = line.removeprefix("elastic: ")
        if self._verbose >= 2 or (self._verbose and ("failed" in line or "formed" in line)):
            print(f"horovod.spark.run_elastic: {line}", file=sys.stderr, flush=True)

    def run(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        env: dict[str, str] | None,
        settings: DriverSettings,
        cooldown_range: tuple[int, int] | None,
    ) -> list[Any]:
        import cloudpickle

        rendezvous = self._rendezvous
        common = dict(rendezvous.env)
        common[elastic_protocol.ELASTIC] = "1"
        common[elastic_protocol.ELASTIC_TIMEOUT] = str(_WORKER_WAIT_S)
        spec = TaskSpec(
            job_key=rendezvous.job_key,
            addr=rendezvous.server.host,
            port=rendezvous.server.port,
            secret=rendezvous.secret,
            start_timeout_s=settings.elastic_timeout_s,
            func_pickle=cloudpickle.dumps((fn, args, kwargs)),
            env=env,
        )
        driver: ElasticDriver

        def start_worker(worker_id: int, host: str, slot: int) -> TaskWorkerProcess:
            worker_env_vars = {**common, elastic_protocol.WORKER_ID: str(worker_id), worker_env.HOSTNAME: host}
            task = self._tasks.start(worker_id, host, worker_env_vars)

            def wait() -> None:
                code = self._tasks.wait_exit(worker_id, task)
                driver.events.put(WorkerExited(worker_id, code, time.monotonic()))

            threading.Thread(target=wait, name=f"hvd-spark-w{worker_id}", daemon=True).start()
            return TaskWorkerProcess(rendezvous.job_key, worker_id, rendezvous.server.set)

        driver = ElasticDriver(
            settings,
            self._tasks,
            HostManager(cooldown_range),
            job_key=rendezvous.job_key,
            start_worker=start_worker,
            publish=rendezvous.server.set,
            log=self._log,
        )
        self._watch = store_watcher(rendezvous.job_key, driver)
        job = SparkJobThread(self._sc, self._num_tasks, elastic_task(spec), rendezvous.job_key, barrier=False)
        job.start()
        try:
            code = driver.run()
        finally:
            rendezvous.server.set(keys.done(rendezvous.job_key), b"1")
            job.join(timeout=_TASKS_END_S)
            if job.is_alive():
                job.cancel()
            rendezvous.stop()
            self._output.close()
        if code != 0:
            last = f"; the last failure: {self._worker_failure}" if self._worker_failure else ""
            raise RuntimeError(f"horovod.spark.run_elastic: {self._failure or 'the job failed'} (status {code}){last}")
        finished = sorted((rank, payload) for _, status, rank, payload in job.outcomes or [] if status == "ok")
        return [cloudpickle.loads(payload) for _, payload in finished]
