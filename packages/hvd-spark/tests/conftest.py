"""Spark sessions for the tests, on this machine, in the tests' own network namespace.

Spark's driver and executors listen on sockets; run where only loopback exists, nothing of theirs
can be reached from (or reach) the machine's network: nox runs these tests under ``unshare --net``
(the package's ``tests-in-private-network``). Run by hand elsewhere, they fail at once, saying so.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from horovod.runner.testing.private_network import require_private_network


def pytest_configure(config: pytest.Config) -> None:
    require_private_network("hvd-spark", "Spark")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Two cores shared by every rank, executor and the driver: one thread each.
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS"):
        os.environ.setdefault(name, "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # Every JVM these tests start (each module's Spark, the examples' and the docs' in their own
    # processes, local-cluster's executors) lives for seconds on a few MB of data: the C2 compiler
    # and the parallel collector's threads only cost CPU there. C1 alone and the serial collector
    # halved the JVM's CPU in a run of examples/spark/torch_digits_estimator.py (54 -> 26 s).
    os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


@pytest.fixture(autouse=True, scope="module")
def _ship_test_functions_by_value(request: pytest.FixtureRequest) -> None:
    """The ranks cannot import the test modules: the functions the tests define are sent by value,
    as a script's are."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(request.module)


def start_spark(master: str, **conf: str) -> object:
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("hvd-spark-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    """Spark in this process with 3 task slots (the tests run 2 and 3 ranks)."""
    session = start_spark("local[3]")
    try:
        yield session
    finally:
        session.stop()  # type: ignore[attr-defined]
