"""horovod.spark.run_elastic on a real local Spark: workers in Spark tasks, a killed worker replaced,
training going on from the last commit."""

from __future__ import annotations

import io

import pytest

import horovod.spark


def train_with_one_crash(marker: str, epochs: int) -> dict:
    import os
    import signal

    import torch

    import horovod.torch as hvd

    hvd.init()
    torch.manual_seed(hvd.rank())  # different on every rank: the state sync makes them equal
    model = torch.nn.Linear(4, 1)
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters()
    )
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer, epoch=0)
    resets = [0]  # this process's own count (state would be synced from rank 0)

    def on_reset() -> None:
        resets[0] += 1

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state: hvd.elastic.TorchState) -> None:
        while state.epoch < epochs:
            optimizer.zero_grad()
            model(torch.full((8, 4), float(state.epoch))).pow(2).mean().backward()
            optimizer.step()
            if state.epoch == 2 and hvd.rank() == 1 and not os.path.exists(marker):
                open(marker, "w").close()
                os.kill(os.getpid(), signal.SIGKILL)  # a worker lost mid-training
            state.epoch += 1
            state.commit()

    train(state)
    return {
        "rank": hvd.rank(),
        "size": hvd.size(),
        "epoch": state.epoch,
        "resets": resets[0],
        "weight": model.weight.detach().flatten().tolist(),
    }


def test_a_killed_worker_is_replaced_and_training_goes_on(spark: object, tmp_path: object) -> None:
    marker = f"{tmp_path}/crashed"
    err = io.StringIO()
    results = horovod.spark.run_elastic(
        train_with_one_crash,
        args=(marker, 6),
        num_proc=2,
        min_num_proc=2,
        max_num_proc=2,
        elastic_timeout=120,
        stderr=err,
        verbose=0,
    )
    assert [r["rank"] for r in results] == [0, 1]
    assert all(r["size"] == 2 and r["epoch"] == 6 for r in results)
    assert results[0]["weight"] == results[1]["weight"]
    assert results[0]["resets"] == 1  # rank 0 survived and went through one reset
    assert results[1]["resets"] == 0  # rank 1 is the replacement, started after the crash
    import os

    assert os.path.exists(marker)


def always_fails() -> None:
    import horovod.torch as hvd

    hvd.init()
    if hvd.rank() == 1:
        raise ValueError("this worker cannot start")

    @hvd.elastic.run
    def train(state: object) -> None:
        hvd.allreduce(__import__("torch").ones(1), name="step")

    train(hvd.elastic.ObjectState(epoch=0))


def test_a_job_that_keeps_failing_ends_with_the_reason(spark: object) -> None:
    with pytest.raises(
        RuntimeError, match=r"reset-limit 1.*worker \d \(on .*\) failed: ValueError: this worker cannot start"
    ):
        horovod.spark.run_elastic(
            always_fails,
            num_proc=2,
            min_num_proc=2,
            max_num_proc=2,
            elastic_timeout=30,
            reset_limit=1,
            stderr=io.StringIO(),
            verbose=0,
        )
