"""horovod.spark.run on ``local-cluster``: two executor JVMs (as on a real cluster), one task slot each."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import horovod.spark
from conftest import start_spark


def executors(session: object) -> int:
    sc = session.sparkContext  # type: ignore[attr-defined]
    return int(sc._jsc.sc().getExecutorMemoryStatus().size()) - 1  # the driver is listed too


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    session = start_spark("local-cluster[2,1,1024]", **{"spark.executor.memory": "768m"})
    try:
        deadline = time.monotonic() + 120
        while executors(session) < 2 and time.monotonic() < deadline:  # the executors' JVMs are starting
            time.sleep(0.5)
        yield session
    finally:
        session.stop()  # type: ignore[attr-defined]


def rank_and_executor() -> tuple[int, int, int, float]:
    import os

    import torch

    import horovod.torch as hvd

    hvd.init()
    total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum).item()
    return hvd.rank(), hvd.local_rank(), os.getppid(), total


def test_ranks_on_two_executors_run_collectives(cluster: object) -> None:
    assert executors(cluster) == 2
    results = horovod.spark.run(rank_and_executor, num_proc=2, start_timeout=120, verbose=0)
    assert [r[0] for r in results] == [0, 1]
    assert sorted(r[1] for r in results) == [0, 1]  # both executors run on this host
    assert results[0][2] != results[1][2]  # each rank's task ran in a Python worker of its own
    assert all(r[3] == 3.0 for r in results)
