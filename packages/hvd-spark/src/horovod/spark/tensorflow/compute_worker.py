"""The tf.data service's compute job on Spark (``spark-submit ... -m`` this module, or ``python -m
horovod.spark.tensorflow.compute_worker CONFIG``): one compute rank per task slot
(``spark.default.parallelism``), run by ``horovod.spark.run``; the driver holds the registration
service and writes CONFIG for the training job, which reads it as from ``horovodrun``'s compute job
(horovod.tensorflow.data). The job ends when the training job calls ``compute_client().shutdown()``,
or at SIGTERM to the driver.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import Any

from horovod.spark import run

_log = logging.getLogger("horovod")


def main(argv: list[str] | None = None) -> int:
    """Runs the compute job on the active (or a new) Spark session; its exit status.

    :param argv: the command line's arguments (default ``sys.argv[1:]``): CONFIG and the options of
        ``python -m horovod.tensorflow.data.compute_worker``.
    """
    from pyspark.sql import SparkSession

    from horovod.tensorflow.data.compute_service import DISPATCHER_SIDES, TfDataServiceConfig, compute_worker_fn
    from horovod.tensorflow.data.registration import ComputeService

    parser = argparse.ArgumentParser(prog="python -m horovod.spark.tensorflow.compute_worker")
    parser.add_argument("configfile", help="where the config the training job reads is written")
    parser.add_argument("--dispatchers", type=int, default=1, help="the number of dispatchers (default 1)")
    parser.add_argument("--dispatchers-work-dir", default=None, help="where fault-tolerant dispatchers journal")
    parser.add_argument("--dispatchers-nic", default=None, help="the interface the servers advertise")
    parser.add_argument("--dispatcher-side", choices=DISPATCHER_SIDES, default="compute")
    parser.add_argument("--timeout", type=int, default=60, help="seconds each job waits for the other")
    args = parser.parse_args(argv)

    spark = SparkSession.builder.getOrCreate()
    workers = spark.sparkContext.defaultParallelism
    if args.dispatchers < 1 or workers % args.dispatchers:
        raise ValueError(
            f"the compute job's {workers} task slots must be a multiple of --dispatchers ({args.dispatchers})"
        )
    service = ComputeService(args.dispatchers_nic)
    config = TfDataServiceConfig(
        dispatchers=args.dispatchers,
        dispatchers_work_dir=args.dispatchers_work_dir,
        dispatchers_nic=args.dispatchers_nic,
        workers_per_dispatcher=workers // args.dispatchers,
        dispatcher_side=args.dispatcher_side,
        addresses=service.addresses(),
        key=service.key,
        timeout=args.timeout,
    )
    config.write(args.configfile)

    def stop(signum: int, frame: Any) -> None:  # (Horovod's took no arguments: it raised when called)
        _log.info("compute job: signal %d, stopping Spark", signum)
        spark.sparkContext.cancelAllJobs()

    in_main_thread = threading.current_thread() is threading.main_thread()  # (only it may set handlers)
    previous = signal.signal(signal.SIGTERM, stop) if in_main_thread else None
    try:
        run(compute_worker_fn, args=(config,), num_proc=workers, stdout=sys.stdout, stderr=sys.stderr, verbose=1)
        return 0
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)
        service.shutdown()


if __name__ == "__main__":
    sys.exit(main())
