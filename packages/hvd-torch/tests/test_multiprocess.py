"""The same cases, with ranks in separate processes launched by horovodrun / horovod.run on Gloo."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest
import torch

import horovod
import test_autograd
import test_collectives
import test_functions
import test_optimizer
from horovod.common.testing import batch

ROOT = pathlib.Path(os.environ.get("HVD_REPO_ROOT", pathlib.Path(__file__).resolve().parents[3]))
RANK_ENV = {"HOROVOD_CPU_OPERATIONS": "gloo", "OMP_NUM_THREADS": "1"}


def _case_then_barrier(case, *args):
    result = case(*args)
    # A rank that returns exits, and its shutdown stops every peer's engine: a peer still running
    # its case's last local checks (a bad root rank, say) would get "Horovod has stopped" instead.
    import horovod.torch as hvd

    if hvd.is_initialized():  # (some cases end with their own shutdown)
        hvd.barrier()
    return result


def processes(case, np_: int, *args):
    return horovod.run(_case_then_barrier, args=(case, *args), np=np_, env=RANK_ENV, start_timeout=120)


CASES = {
    "allreduce_every_dtype_and_op": (test_collectives.case_allreduce_every_dtype_and_op, ()),
    "allreduce_in_place": (test_collectives.case_allreduce_in_place, ()),
    "allgather": (test_collectives.case_allgather, ()),
    "broadcast": (test_collectives.case_broadcast, ()),
    "alltoall": (test_collectives.case_alltoall, ()),
    "reducescatter": (test_collectives.case_reducescatter, ()),
    "grouped": (test_collectives.case_grouped, ()),
    "sparse_allreduce": (test_collectives.case_sparse_allreduce, ()),
    "poll_before_completion": (test_collectives.case_poll_before_completion, ()),
    "mismatches": (test_collectives.case_mismatches, ()),
    "allreduce_grad": (test_autograd.case_allreduce_grad, ()),
    "allgather_grad": (test_autograd.case_allgather_grad, ()),
    "broadcast_grad": (test_autograd.case_broadcast_grad, ()),
    "alltoall_grad": (test_autograd.case_alltoall_grad, ()),
    "reducescatter_grad": (test_autograd.case_reducescatter_grad, ()),
    "broadcast_parameters": (test_functions.case_broadcast_parameters, (0,)),
    "optimizer_sgd": (test_optimizer.case_train, ({"optimizer": "sgd"},)),
    "join": (test_collectives.case_join, ()),
}


# Every case of one rank count runs in one launch (hvd-core's batch kit): a launch's cost is mostly
# its ranks importing torch. Each case is still a test of its own, failing with each rank's
# traceback. A case that fails on one rank part-way leaves its peers in a collective it never
# submits: the stall shutdown turns that into an error on every rank instead of a hang.
BATCH_ENV = {**RANK_ENV, "HOROVOD_STALL_CHECK_TIME_SECONDS": "10", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "30"}


@pytest.fixture(scope="module", params=[2, 3], ids=lambda np_: f"np{np_}")
def outcomes(request: pytest.FixtureRequest) -> batch.Outcomes:
    selected = batch.selected(request, "name")
    calls = [(name, case, args) for name, (case, args) in CASES.items() if name in selected]  # join last
    return batch.run_batch(calls, request.param, BATCH_ENV)


def check_join(results: list) -> None:
    assert results == [len(results) - 1] * len(results)  # the last rank to join is the highest


def check_optimizer(results: list) -> None:
    """Every rank holds the parameters of single-process training on the whole batch."""
    for other in results[1:]:
        for a, b in zip(results[0], other, strict=True):
            assert torch.equal(a, b), "ranks hold different parameters"
    for got, want in zip(results[0], test_optimizer.reference(len(results), {"optimizer": "sgd"}), strict=True):
        assert torch.allclose(got, want, atol=1e-10, rtol=0), (got - want).abs().max()


#: What a case's results must satisfy, beyond it succeeding on every rank.
CHECKS = {"join": check_join, "optimizer_sgd": check_optimizer}


@pytest.mark.parametrize("name", list(CASES))
def test_case_in_processes(outcomes: batch.Outcomes, name: str) -> None:
    results = outcomes.check(name)
    if name in CHECKS:
        CHECKS[name](results)


def test_digits_example_through_horovodrun() -> None:
    script = ROOT / "examples" / "pytorch" / "pytorch_digits.py"
    if not script.is_file():
        pytest.fail(f"example not found at {script}")
    done = subprocess.run(
        ["horovodrun", "-np", "2", "-H", "localhost:2", sys.executable, str(script), "--epochs", "10"],
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, **RANK_ENV},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"\[0\]<stdout>:.*epoch", done.stdout), done.stdout[-2000:]
    final = re.search(r"final test accuracy ([0-9.]+) \(2 ranks.*identical weights on every rank: True\)", done.stdout)
    assert final and float(final.group(1)) >= 0.95, done.stdout[-2000:]


def case_beside_torch_distributed(port: int) -> list:
    """One rank using torch.distributed (its own bundled gloo) and hvd (Debian's gloo) together."""
    import torch.distributed as dist

    import horovod.torch as hvd

    hvd.init()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=hvd.rank(), world_size=hvd.size())
    results = []
    for step in range(3):
        mine = torch.full((1000,), float(hvd.rank() + step))
        theirs = mine.clone()
        dist.all_reduce(theirs)
        ours = hvd.allreduce(mine, op=hvd.Sum, name="beside")
        assert torch.equal(ours, theirs), (ours[:3], theirs[:3])
        results.append(float(ours[0]))
    dist.destroy_process_group()
    hvd.shutdown()
    return results


@pytest.mark.parametrize("np_", [2, 3])
def test_runs_beside_torch_distributed_in_the_same_ranks(np_: int) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    expected = [float(sum(r + step for r in range(np_))) for step in range(3)]
    assert processes(case_beside_torch_distributed, np_, port) == [expected] * np_
