"""``horovod.spark.run``: a function as a Horovod job on the Spark application's executors."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from horovod.runner.output import OutputRouter
from horovod.spark.driver import SparkJob

#: Horovod's default for the seconds Spark gets to start every task (``HOROVOD_SPARK_START_TIMEOUT``).
DEFAULT_START_TIMEOUT_S = 600
#: Seconds Gloo waits for its peers when the ranks connect (``HOROVOD_GLOO_TIMEOUT_SECONDS`` wins).
DEFAULT_GLOO_TIMEOUT_S = 30


def run(
    fn: Callable[..., Any],
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    num_proc: int | None = None,
    start_timeout: float | None = None,
    extra_mpi_args: str | None = None,
    env: Mapping[str, str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    verbose: int = 1,
    nics: Sequence[str] | None = None,
    prefix_output_with_timestamp: bool = False,
    use_mpi: bool | None = None,
    use_gloo: bool | None = None,
) -> list[Any]:
    """Runs ``fn(*args, **kwargs)`` as a Horovod job on Spark, one rank per Spark task; returns
    every rank's result, by rank.

    :param fn: the function each rank runs (it calls ``hvd.init()``); sent with cloudpickle.
    :param args: positional arguments of ``fn``.
    :param kwargs: keyword arguments of ``fn``.
    :param num_proc: number of ranks; defaults to ``spark.default.parallelism``. Spark must be able
        to run that many tasks at once (the job runs in barrier mode, and fails at once otherwise).
    :param start_timeout: seconds for every task to start; defaults to ``HOROVOD_SPARK_START_TIMEOUT``
        or 600.
    :param extra_mpi_args: accepted for Horovod's signature; the ranks use Gloo, so it must be unset.
    :param env: variables laid over each task's own environment for its rank (the executors'
        environment is kept, since the driver's own may not fit the executors' hosts).
    :param stdout: where the ranks' standard output is printed, each line prefixed
        ``[rank]<stdout>:``; defaults to ``sys.stdout``.
    :param stderr: the same for standard error; defaults to ``sys.stderr``.
    :param verbose: 0 quiet; 1 (default) and 2 print where the ranks run.
    :param nics: network interfaces the ranks use between them, and on which the driver serves the
        job's rendezvous; by default the address Spark's executors reach the driver by
        (``spark.driver.host``).
    :param prefix_output_with_timestamp: prefix each line of the ranks' output with the time.
    :param use_mpi: MPI is refused: MPI needs ``mpirun`` to start every rank, and here Spark does.
    :param use_gloo: the ranks use Gloo (the default; ``True`` or ``None``).
    :raises RankFailed: naming the rank that failed first, with its exception and traceback.
    :raises TimeoutError: when Spark did not start every task within ``start_timeout``.
    """
    if use_mpi:
        raise ValueError(
            "horovod.spark.run(use_mpi=True): MPI needs mpirun to start every rank, and here Spark's tasks "
            "start them; the ranks use Gloo (leave use_mpi unset)"
        )
    if use_gloo is False:
        raise ValueError("horovod.spark.run(use_gloo=False): Gloo is the only controller on Spark; leave it unset")
    if extra_mpi_args:
        raise ValueError(f"horovod.spark.run(extra_mpi_args={extra_mpi_args!r}): the ranks use Gloo, not MPI")
    import cloudpickle
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        raise RuntimeError("horovod.spark.run needs an active SparkSession: create one with SparkSession.builder")
    sc = spark.sparkContext
    num_proc = sc.defaultParallelism if num_proc is None else num_proc
    if num_proc < 1:
        raise ValueError(f"horovod.spark.run(num_proc={num_proc}): at least one process")
    timeout = _start_timeout(start_timeout)
    nic_list = list(nics or [])
    log = _logger(verbose)
    output = OutputRouter(
        stdout or sys.stdout, stderr or sys.stderr, size=num_proc, prefix_timestamp=prefix_output_with_timestamp
    )
    job = SparkJob(
        sc,
        num_proc,
        host=driver_host(sc, nic_list),
        nics=nic_list,
        start_timeout_s=timeout,
        gloo_timeout_s=int(os.environ.get("HOROVOD_GLOO_TIMEOUT_SECONDS", DEFAULT_GLOO_TIMEOUT_S)),
        output=output,
        log=log,
    )
    return job.run(cloudpickle.dumps((fn, tuple(args), dict(kwargs or {}))), dict(env) if env is not None else None)


def _start_timeout(given: float | None) -> float:
    if given is not None:
        if given <= 0:
            raise ValueError(f"horovod.spark.run(start_timeout={given}): must be positive")
        return float(given)
    raw = os.environ.get("HOROVOD_SPARK_START_TIMEOUT", "").strip()
    try:
        return float(raw) if raw else float(DEFAULT_START_TIMEOUT_S)
    except ValueError:
        raise ValueError(f"HOROVOD_SPARK_START_TIMEOUT={raw!r} is not a number of seconds") from None


def driver_host(sc: Any, nics: list[str]) -> str:
    """The address the executors reach the driver by: the first nic's, else Spark's own."""
    if nics:
        from horovod.runner.rendezvous.job import interface_address

        return interface_address(nics[0])
    host = sc.getConf().get("spark.driver.host") or socket.gethostname()
    return socket.gethostbyname(host)


def _logger(verbose: int) -> Callable[[str], None]:
    def log(message: str) -> None:
        if verbose >= 1:
            print(f"horovod.spark.run: {message}", file=sys.stderr, flush=True)

    return log
