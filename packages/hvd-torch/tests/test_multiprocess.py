"""The same cases, with ranks in separate processes launched by horovodrun / horovod.run on Gloo."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
from collections.abc import Callable

import pytest
import torch

import horovod
import test_autograd
import test_collectives
import test_functions
import test_optimizer

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
    "join": (test_collectives.case_join, ()),
}


# The order the shared launch runs them in: join last, as a job ends with it.
ORDER = sorted(CASES, key=lambda name: (name == "join", name))


def _every_case(names: list[str]) -> dict:
    """Each named case in turn on this rank, as its own launch would run it: {name: its result}.

    One launch for all of them: a launch's cost is mostly its processes importing torch, seconds
    each on two shared cores. A case that fails ends this rank, naming the case; its peers then
    stop as they would in a launch of that case alone."""
    import horovod.torch as hvd

    results = {}
    for name in names:
        case, args = CASES[name]
        try:
            results[name] = _case_then_barrier(case, *args)
        except BaseException as error:
            raise RuntimeError(f"case {name!r} failed on rank {hvd.rank()}: {error!r}") from error
    return results


@pytest.fixture(scope="module")
def every_case_run() -> Callable[[int], list[dict] | Exception]:
    """The launch of every case on `np_` processes, made once per size: what each rank returned, or
    the launch's error."""
    runs: dict[int, list[dict] | Exception] = {}

    def run(np_: int) -> list[dict] | Exception:
        if np_ not in runs:
            try:
                runs[np_] = processes(_every_case, np_, ORDER)
            except Exception as error:  # each case's test reports what it means for that case
                runs[np_] = error
        return runs[np_]

    return run


def case_result(run: list[dict] | Exception, name: str) -> list | None:
    """The results of case `name` on every rank. When the launch failed: fails the test if this
    case is the one that failed, or came after it (it never ran); None if it came before (every rank
    passed the barrier after it)."""
    if isinstance(run, Exception):
        failed = re.search(r"case '([a-z_]+)' failed", str(run))
        if failed is None or failed.group(1) == name:
            pytest.fail(f"case {name!r} did not complete: {run}")
        if ORDER.index(failed.group(1)) < ORDER.index(name):
            pytest.fail(f"case {name!r} did not run: case {failed.group(1)!r} failed before it ({run})")
        return None
    return [ranks_results[name] for ranks_results in run]


@pytest.mark.parametrize("np_", [2, 3])
@pytest.mark.parametrize("name", sorted(CASES))
def test_case_in_processes(every_case_run: Callable[[int], list[dict] | Exception], name: str, np_: int) -> None:
    results = case_result(every_case_run(np_), name)
    if name == "join" and results is not None:  # the last rank to join is the highest
        assert results == [np_ - 1] * np_


@pytest.mark.parametrize("np_", [2, 3])
def test_optimizer_matches_single_process_training(np_: int) -> None:
    config = {"optimizer": "sgd"}
    results = processes(test_optimizer.case_train, np_, config)
    for other in results[1:]:
        for a, b in zip(results[0], other, strict=True):
            assert torch.equal(a, b), "ranks hold different parameters"
    for got, want in zip(results[0], test_optimizer.reference(np_, config), strict=True):
        assert torch.allclose(got, want, atol=1e-10, rtol=0), (got - want).abs().max()


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
