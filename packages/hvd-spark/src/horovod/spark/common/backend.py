"""Where an Estimator's training function runs: Horovod's ``Backend`` interface, and
``SparkBackend``, which runs it with ``horovod.spark.run`` on the application's executors.

A custom Backend serves when the training runs somewhere other than the Spark application that
holds the DataFrame (the data reaches the ranks through the Store, not through Spark)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


class Backend:
    """Interface for remote execution of the distributed training function."""

    def run(
        self,
        fn: Callable[..., Any],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> list[Any]:
        """Executes ``fn`` on every worker; returns each worker's result, by ascending rank.

        :param fn: function to run.
        :param args: positional arguments of ``fn``.
        :param kwargs: keyword arguments of ``fn``.
        :param env: environment variables for the run (defaults to the workers' own).
        """
        raise NotImplementedError

    def num_processes(self) -> int:
        """The number of processes the training uses."""
        raise NotImplementedError


class SparkBackend(Backend):
    """Runs the training function with ``horovod.spark.run``.

    :param num_proc: number of Horovod processes; defaults to ``spark.default.parallelism``.
    :param env: environment variables for every rank.
    :param kwargs: further arguments of ``horovod.spark.run`` (``start_timeout``, ``stdout``,
        ``stderr``, ``verbose``, ``nics``, ``prefix_output_with_timestamp``...).
    """

    def __init__(self, num_proc: int | None = None, env: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        self._num_proc = num_proc
        self._env = dict(env) if env is not None else None
        self._kwargs = kwargs

    def run(
        self,
        fn: Callable[..., Any],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> list[Any]:
        from horovod.spark.runner import run

        merged = {**(self._env or {}), **(env or {})}
        return run(
            fn,
            args=args,
            kwargs=kwargs,
            num_proc=self.num_processes(),
            env=merged or None,
            **self._kwargs,
        )

    def num_processes(self) -> int:
        if self._num_proc is not None:
            return self._num_proc
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            raise RuntimeError("SparkBackend needs an active SparkSession (or give num_proc)")
        return int(spark.sparkContext.defaultParallelism)
