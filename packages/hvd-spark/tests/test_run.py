"""horovod.spark.run on a real local Spark: ranks as barrier tasks, collectives between them,
results by rank, failures named by rank, output forwarded."""

from __future__ import annotations

import io

import pytest

import horovod.spark
from horovod.spark import RankFailed


def collectives_job() -> dict:
    import numpy as np
    import torch

    import horovod.torch as hvd

    hvd.init()
    try:
        rank, size = hvd.rank(), hvd.size()
        total = hvd.allreduce(torch.tensor([float(rank + 1)]), op=hvd.Sum).item()
        gathered = hvd.allgather(torch.tensor([[rank]] * (rank + 1))).flatten().tolist()
        root = hvd.broadcast(torch.tensor([rank * 10]), root_rank=size - 1).item()
        print(f"hello from rank {rank}", flush=True)
        return {
            "rank": rank,
            "size": size,
            "local_rank": hvd.local_rank(),
            "local_size": hvd.local_size(),
            "sum": total,
            "gathered": gathered,
            "root": root,
            "np": int(np.int64(7)),
        }
    finally:
        hvd.shutdown()


@pytest.mark.parametrize("num_proc", [2, 3])
def test_run_returns_results_by_rank_and_the_collectives_work(spark: object, num_proc: int) -> None:
    out = io.StringIO()
    results = horovod.spark.run(collectives_job, num_proc=num_proc, stdout=out, start_timeout=120, verbose=0)
    assert [r["rank"] for r in results] == list(range(num_proc))
    for r in results:
        assert r["size"] == num_proc
        assert r["local_size"] == num_proc  # every task runs on this host
        assert r["sum"] == sum(range(1, num_proc + 1))
        assert r["gathered"] == [i for i in range(num_proc) for _ in range(i + 1)]
        assert r["root"] == (num_proc - 1) * 10
    assert sorted(r["local_rank"] for r in results) == list(range(num_proc))
    for rank in range(num_proc):
        assert f"[{rank}]<stdout>:hello from rank {rank}" in out.getvalue()


def add(a: int, b: int, *, scale: int) -> int:
    import os

    return (a + b) * scale + int(os.environ["HOROVOD_RANK"]) + int(os.environ["MY_SETTING"])


def test_arguments_and_env_reach_every_rank(spark: object) -> None:
    results = horovod.spark.run(
        add, args=(1, 2), kwargs={"scale": 10}, num_proc=2, env={"MY_SETTING": "100"}, verbose=0
    )
    assert results == [130, 131]


def fails_on_rank_one() -> int:
    import torch

    import horovod.torch as hvd

    hvd.init()
    if hvd.rank() == 1:
        raise ValueError("rank one cannot go on")
    hvd.allreduce(torch.ones(1), name="after_the_failure")  # the survivor's collective fails, naming rank 1
    return hvd.rank()


def test_a_rank_that_raises_fails_run_naming_it(spark: object) -> None:
    with pytest.raises(RankFailed, match=r"rank 1 failed: ValueError: rank one cannot go on") as failure:
        horovod.spark.run(fails_on_rank_one, num_proc=2, start_timeout=120, verbose=0, stderr=io.StringIO())
    assert failure.value.rank == 1
    assert "Traceback" in failure.value.remote_traceback


def test_more_processes_than_spark_can_run_at_once_end_at_the_start_timeout(spark: object) -> None:
    # Spark holds a barrier stage that needs more slots than it has (an application may yet get more
    # executors): the job ends at start_timeout, saying how many tasks started and what to change.
    with pytest.raises(TimeoutError, match=r"only 0 of 5 Spark tasks started within start_timeout=5 s"):
        horovod.spark.run(add, args=(1, 2), kwargs={"scale": 1}, num_proc=5, start_timeout=5, verbose=0)
    # The cancelled job left Spark able to run the next one.
    assert horovod.spark.run(add, args=(1, 2), kwargs={"scale": 1}, num_proc=2, env={"MY_SETTING": "0"}, verbose=0) == [
        3,
        4,
    ]


def test_mpi_is_refused_with_the_reason(spark: object) -> None:
    with pytest.raises(ValueError, match="MPI needs mpirun"):
        horovod.spark.run(add, num_proc=2, use_mpi=True)


def killed_on_rank_one() -> int:
    import os
    import signal

    import torch

    import horovod.torch as hvd

    hvd.init()
    if hvd.rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    hvd.allreduce(torch.ones(1), name="after_the_kill")
    return hvd.rank()


def test_a_killed_rank_is_named_with_the_signal(spark: object) -> None:
    with pytest.raises(RankFailed, match=r"rank 1 failed: its process was killed by signal SIGKILL") as failure:
        horovod.spark.run(killed_on_rank_one, num_proc=2, start_timeout=120, verbose=0, stderr=io.StringIO())
    assert failure.value.rank == 1
    assert "(ranks [0] failed too)" in str(failure.value)  # rank 0's allreduce failed, naming rank 1


def fails_while_rank_zero_keeps_going() -> int:
    import time

    import horovod.torch as hvd

    hvd.init()
    if hvd.rank() == 1:
        raise ValueError("rank one gives up")
    time.sleep(300)  # no collective: nothing tells rank 0 that rank 1 is gone
    return 0


def test_ranks_still_running_after_a_failure_are_cancelled(spark: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from horovod.spark import driver

    monkeypatch.setattr(driver, "FAILURE_GRACE_S", 3.0)
    with pytest.raises(RankFailed, match=r"rank 1 failed: ValueError: rank one gives up") as failure:
        horovod.spark.run(
            fails_while_rank_zero_keeps_going, num_proc=2, start_timeout=120, verbose=0, stderr=io.StringIO()
        )
    assert failure.value.rank == 1


def test_a_ranks_threads_are_its_hosts_cores_over_its_ranks(monkeypatch) -> None:
    """As horovodrun does: OMP_NUM_THREADS and the others, where neither the executor nor the caller
    set them; what the caller's env sets stays."""
    from horovod.runner import threads
    from horovod.spark.task import TaskSpec

    for name in threads.VARIABLES:
        monkeypatch.delenv(name, raising=False)
    spec = TaskSpec("job", "127.0.0.1", 1, b"s", 1.0, b"", {"MKL_NUM_THREADS": "3"})
    env = spec.environment({"HOROVOD_LOCAL_SIZE": "2", "HOROVOD_RANK": "0"})
    assert env["OMP_NUM_THREADS"] == str(threads.share(threads.host_cores(), 2))
    assert env["MKL_NUM_THREADS"] == "3"


def straggling_job() -> int:
    import time

    import numpy as np

    import horovod.common as hvd

    hvd.init()
    for _ in range(4):
        if hvd.rank() == 1:
            time.sleep(0.3)
        hvd.allreduce(np.ones(8, np.float32), name="gradient")
    hvd.shutdown()
    return 0


def test_the_job_end_report_names_the_straggler(spark: object, capfd: pytest.CaptureFixture[str]) -> None:
    horovod.spark.run(straggling_job, num_proc=2, start_timeout=120, verbose=1)
    err = capfd.readouterr().err
    assert "horovod.spark.run: job report: 2 of 2 ranks reported" in err, err[-3000:]
    assert "horovod.spark.run:   straggler: rank 1 arrived last at" in err, err[-3000:]
