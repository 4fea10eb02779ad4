"""broadcast_parameters, broadcast_optimizer_state, broadcast_object, allgather_object."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import horovod.torch as hvd
from hvdtorch_testutil import cluster, expect_error, seeded


def model_for(rank: int) -> torch.nn.Module:
    """A different model on every rank (as with unseeded random initialisation)."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 2))
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(seeded(tuple(p.shape), seed=100 * rank + i, dtype=torch.float32))
        model[1].running_mean.fill_(float(rank))
        model[1].num_batches_tracked.fill_(rank + 5)
    return model


def params_as(form: str, model: torch.nn.Module) -> Any:
    """The parameters of ``model`` in one of the forms broadcast_parameters takes."""
    if form == "state_dict":
        return model.state_dict()
    if form == "named_parameters":
        return model.named_parameters()
    if form == "parameters":
        return model.parameters()
    return list(model.parameters())


def case_broadcast_parameters(root: int) -> list:
    hvd.init()
    rank = hvd.rank()
    expected = model_for(root).state_dict()
    for form in ("state_dict", "named_parameters", "parameters", "list"):
        model = model_for(rank)
        hvd.broadcast_parameters(params_as(form, model), root_rank=root)
        got = model.state_dict()
        for key, value in expected.items():
            if form == "state_dict" or key in dict(model.named_parameters()):
                assert torch.equal(got[key], value), (form, key)
        assert model[0].weight.requires_grad  # parameters stay parameters
    expect_error(ValueError, ("invalid params",), lambda: hvd.broadcast_parameters(42, root_rank=0))
    return list(model.state_dict().values())


@pytest.mark.parametrize("np_,root", [(2, 0), (3, 1), (3, 2)])
def test_broadcast_parameters(np_: int, root: int) -> None:
    cluster(case_broadcast_parameters, np_, root)


# --- objects ----------------------------------------------------------------------------------------


def case_objects() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    root = n - 1
    payload = {"step": 7, "tensor": torch.arange(5), "fn": (lambda x: x + rank)} if rank == root else None
    got = hvd.broadcast_object(payload, root_rank=root)
    assert got["step"] == 7 and got["tensor"].tolist() == list(range(5)) and got["fn"](1) == 1 + root
    if rank == root:
        assert got is payload  # the root keeps its own object
    assert hvd.broadcast_object(f"from {rank}" * (rank + 1), name="named") == "from 0"
    everyone = hvd.allgather_object({"rank": rank, "data": list(range(rank * 100))})
    assert [o["rank"] for o in everyone] == list(range(n))
    assert [len(o["data"]) for o in everyone] == [r * 100 for r in range(n)]
    assert hvd.allgather_object(None, name="nothing") == [None] * n
    # Within a process set: root_rank is a global rank, as in Horovod.
    others = hvd.add_process_set(list(range(1, n)))
    if others.included():
        assert hvd.broadcast_object(rank, root_rank=n - 1, process_set=others) == n - 1
        assert hvd.allgather_object(rank, process_set=others) == list(range(1, n))
    hvd.barrier()


@pytest.mark.parametrize("np_", [2, 3])
def test_broadcast_and_allgather_objects(np_: int) -> None:
    cluster(case_objects, np_, env={"HOROVOD_DYNAMIC_PROCESS_SETS": "1"})


# --- optimizer state --------------------------------------------------------------------------------


def make(kind: str, model: torch.nn.Module, rank: int) -> torch.optim.Optimizer:
    # Hyperparameters differ per rank: broadcasting makes them the root's.
    lr = 0.1 * (rank + 1)
    if kind == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=0.01)
    if kind == "adam":
        return torch.optim.Adam(model.parameters(), lr=lr, betas=(0.8, 0.9 + 0.01 * rank), weight_decay=0.01)
    if kind == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr)
    if kind == "rmsprop":
        return torch.optim.RMSprop(model.parameters(), lr=lr, momentum=0.5, centered=True)
    if kind == "adagrad":
        return torch.optim.Adagrad(model.parameters(), lr=lr)
    raise ValueError(kind)


def local_steps(model: torch.nn.Module, optimizer: torch.optim.Optimizer, rank: int, steps: int) -> None:
    for step in range(steps):
        optimizer.zero_grad()
        x = seeded((5, 4), seed=1000 * rank + step, dtype=torch.float32)
        model(x).square().mean().backward()
        optimizer.step()


def snapshot(optimizer: torch.optim.Optimizer) -> dict:
    state = optimizer.state_dict()
    return {
        "groups": [{k: v for k, v in g.items() if k != "params"} for g in state["param_groups"]],
        "state": {
            i: {k: (v.clone() if torch.is_tensor(v) else v) for k, v in s.items()} for i, s in state["state"].items()
        },
    }


def assert_same_state(a: dict, b: dict, what: str) -> None:
    assert a["groups"] == b["groups"], (what, a["groups"], b["groups"])
    assert a["state"].keys() == b["state"].keys(), what
    for i in a["state"]:
        assert a["state"][i].keys() == b["state"][i].keys(), (what, i)
        for key, value in a["state"][i].items():
            other = b["state"][i][key]
            if torch.is_tensor(value) and value.is_sparse:  # compared by the values they stand for
                value, other = value.to_dense(), other.to_dense()
            assert torch.equal(value, other) if torch.is_tensor(value) else value == other, (what, i, key)


def case_optimizer_state(kind: str, root_steps: int, distributed: bool) -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    root = n - 1
    model = model_for(rank)
    hvd.broadcast_parameters(model.state_dict(), root_rank=root)
    optimizer = make(kind, model, rank)
    if rank == root and root_steps:
        local_steps(model, optimizer, rank, root_steps)  # the root has real state; the others none yet
    if distributed:
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    params_before = [p.detach().clone() for p in model.parameters()]
    hvd.broadcast_optimizer_state(optimizer, root_rank=root)
    # The lazily created state exists now, and the dummy step moved no parameter (weight decay!).
    assert len(optimizer.state) > 0
    assert all(torch.equal(a, b) for a, b in zip(params_before, model.parameters(), strict=True))
    assert all(p.grad is None for p in model.parameters()) or root_steps, "gradients left behind"
    mine = snapshot(optimizer)
    roots = hvd.broadcast_object(mine, root_rank=root)
    assert_same_state(mine, roots, f"rank {rank}")
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * (root + 1))
    # Training on continues identically everywhere.
    hvd.broadcast_parameters(model.state_dict(), root_rank=root)
    if not distributed:
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for step in range(2):
        optimizer.zero_grad()
        model(seeded((3, 4), seed=50 * rank + step, dtype=torch.float32)).sum().backward()
        optimizer.step()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = hvd.allgather(flat.unsqueeze(0))
    assert all(torch.equal(gathered[0], g) for g in gathered), "parameters diverged"


@pytest.mark.parametrize("kind", ["sgd", "adam", "adamw", "rmsprop", "adagrad"])
@pytest.mark.parametrize("root_steps", [0, 2], ids=["all-fresh", "root-trained"])
def test_broadcast_optimizer_state(kind: str, root_steps: int) -> None:
    cluster(case_optimizer_state, 3, kind, root_steps, False)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_broadcast_optimizer_state_of_distributed_optimizer(kind: str) -> None:
    cluster(case_optimizer_state, 2, kind, 0, True)
    cluster(case_optimizer_state, 2, kind, 3, True)


class _SparseModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(10, 3, sparse=True)
        self.linear = torch.nn.Linear(3, 1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.linear(self.embedding(ids)).sum()


def case_optimizer_state_with_sparse_model() -> None:
    """Horovod's third parameter: broadcast_optimizer_state(opt, root, model), whose sparse
    embeddings get sparse gradients in the step that creates the state (SGD's momentum buffer of a
    sparse gradient is what a real step makes); the state ends equal to the root's."""
    hvd.init()
    rank, root = hvd.rank(), hvd.size() - 1
    torch.manual_seed(rank)
    model = _SparseModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if rank == root:
        for step in range(2):
            optimizer.zero_grad()
            model(torch.tensor([step, step + 3])).backward()
            optimizer.step()
    hvd.broadcast_parameters(model.state_dict(), root)
    hvd.broadcast_optimizer_state(optimizer, root, model)  # positional, as Horovod scripts call it
    mine = snapshot(optimizer)
    assert_same_state(mine, hvd.broadcast_object(mine, root_rank=root), f"rank {rank}")


def test_broadcast_optimizer_state_takes_horovods_model_argument() -> None:
    cluster(case_optimizer_state_with_sparse_model, 2)


def case_optimizer_state_misuse() -> None:
    hvd.init()
    rank = hvd.rank()
    model = model_for(rank)
    expect_error(
        ValueError, ("LBFGS",), lambda: hvd.broadcast_optimizer_state(torch.optim.LBFGS(model.parameters()), 0)
    )
    params = list(model.parameters())
    optimizer = torch.optim.SGD(params if rank == 0 else params[:-1], lr=0.1, momentum=0.9)
    expect_error(
        ValueError,
        ("differ between ranks", "rank 0: [6]", "rank 1: [5]"),
        lambda: hvd.broadcast_optimizer_state(optimizer, 0),
    )


def test_broadcast_optimizer_state_misuse() -> None:
    cluster(case_optimizer_state_misuse, 2)
