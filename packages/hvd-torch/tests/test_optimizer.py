"""DistributedOptimizer: every rank ends with the same parameters, equal to single-process training
on the combined batch."""

from __future__ import annotations

import pytest
import torch

import horovod.torch as hvd
from horovod.common.testing.adasum import combine
from hvdtorch_testutil import cluster, cluster_warnings, expect_error, seeded

BATCH, FEATURES, CLASSES = 4, 6, 3


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(FEATURES, 5)
        self.fc2 = torch.nn.Linear(5, CLASSES)
        self.extra = torch.nn.Linear(5, CLASSES)  # used only when asked (dynamic graphs)
        with torch.no_grad():  # deterministic: the global generator is shared by the rank threads
            for i, p in enumerate(self.parameters()):
                p.copy_(seeded(tuple(p.shape), seed=1000 + i, dtype=torch.float32))
        self.double()

    def forward(self, x: torch.Tensor, use_extra: bool = True) -> torch.Tensor:
        h = torch.tanh(self.fc1(x))
        return self.fc2(h) + (self.extra(h) if use_extra else 0)


def batch(step: int, rank: int, micro: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    seed = 10_000 * step + 100 * micro + rank
    x = seeded((BATCH, FEATURES), seed=seed)
    y = torch.randint(0, CLASSES, (BATCH,), generator=torch.Generator().manual_seed(seed))
    return x, y


def make_optimizer(name: str, params) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.1, momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(params, lr=0.01)
    raise ValueError(name)


def loss_of(model: Net, x: torch.Tensor, y: torch.Tensor, use_extra: bool = True) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(model(x, use_extra), y)


def case_train(config: dict) -> list[torch.Tensor]:
    hvd.init()
    rank, n = hvd.rank(), hvd.size()
    model = Net()
    base = make_optimizer(config.get("optimizer", "sgd"), model.parameters())
    kwargs = dict(config.get("kwargs", {}))
    if config.get("named", True):
        kwargs["named_parameters"] = model.named_parameters()
    if config.get("groups_as_params"):
        kwargs["groups"] = [[model.fc1.weight, model.fc2.weight], [model.extra.bias]]
    opt = hvd.DistributedOptimizer(base, **kwargs)
    assert isinstance(opt, type(base)) and type(opt).__name__ == type(base).__name__
    passes = kwargs.get("backward_passes_per_step", 1)
    for step in range(config.get("steps", 4)):
        opt.zero_grad()
        for micro in range(passes):
            x, y = batch(step, rank, micro)
            # Optionally the last rank never uses `extra`: it still takes part in its allreduce.
            use_extra = not (config.get("unused_on_last_rank") and rank == n - 1)
            loss_of(model, x, y, use_extra).backward()
            if micro == 0 and passes == 1 and use_extra:
                assert any(h is not None for h, _ in opt._handles.values()), (
                    "allreduces were not started during backward()"
                )
        if config.get("clip"):
            opt.synchronize()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config["clip"])
            with opt.skip_synchronize():
                opt.step()
        else:
            opt.step()
    return [p.detach().clone() for p in model.parameters()]


def reference(n: int, config: dict) -> list[torch.Tensor]:
    """Single-process training on the combined batch of the n ranks."""
    model = Net()
    opt = make_optimizer(config.get("optimizer", "sgd"), model.parameters())
    kwargs = config.get("kwargs", {})
    passes = kwargs.get("backward_passes_per_step", 1)
    scale = n if kwargs.get("op", hvd.Average) == hvd.Sum else 1
    for step in range(config.get("steps", 4)):
        opt.zero_grad()
        for micro in range(passes):
            for rank in range(n):
                x, y = batch(step, rank, micro)
                use_extra = not (config.get("unused_on_last_rank") and rank == n - 1)
                (loss_of(model, x, y, use_extra) * scale / n).backward()
        if config.get("clip"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), config["clip"])
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def check(config: dict, np_: int, atol: float = 1e-10) -> None:
    results = cluster(case_train, np_, config)
    for other in results[1:]:
        for a, b in zip(results[0], other, strict=True):
            assert torch.equal(a, b), "ranks hold different parameters"
    expected = reference(np_, config)
    initial = [p.detach() for p in Net().parameters()]
    for got, want, start in zip(results[0], expected, initial, strict=True):
        assert torch.allclose(got, want, atol=atol, rtol=0), (got - want).abs().max()
        assert not torch.allclose(got, start), "training did not move the parameters"


@pytest.mark.parametrize("np_", [2, 3])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_matches_single_process_training(np_: int, optimizer: str) -> None:
    check({"optimizer": optimizer}, np_)


@pytest.mark.parametrize(
    "config",
    [
        {"named": False},
        {"kwargs": {"op": hvd.Sum}},
        {"kwargs": {"gradient_predivide_factor": 2.0}},
        {"kwargs": {"groups": 2}},
        {"groups_as_params": True},
        {"kwargs": {"sparse_as_dense": True}},  # dense gradients: no effect
        {"unused_on_last_rank": True},
        {"unused_on_last_rank": True, "kwargs": {"groups": 2}},
        {"clip": 0.05},
        {"optimizer": "adam", "kwargs": {"backward_passes_per_step": 2}},
    ],
    ids=lambda c: str(c).replace(" ", ""),
)
def test_options(config: dict) -> None:
    check(config, 3)


@pytest.mark.parametrize("np_", [2, 3])
def test_backward_passes_per_step_accumulates_locally(np_: int) -> None:
    check({"kwargs": {"backward_passes_per_step": 3}, "steps": 3}, np_)


def test_fp16_compression() -> None:
    check({"kwargs": {"compression": hvd.Compression.fp16}}, 2, atol=2e-3)


class CastingCompressor(hvd.Compression.fp16):
    """Compression.fp16's casts, as a user's own compressor: the optimizer runs it as given (a new
    float16 tensor per gradient and step), not with Compression.fp16's kept copies."""


@pytest.mark.parametrize("extra", [{}, {"groups": 2}, {"backward_passes_per_step": 2}], ids=str)
def test_fp16_compression_kept_copies_give_the_casts_bits(extra: dict) -> None:
    """DistributedOptimizer keeps each gradient's float16 copy between steps and casts the result
    into the gradient (kept_compression.py): the same bits as casting anew every step."""
    kept = cluster(case_train, 2, {"kwargs": {"compression": hvd.Compression.fp16, **extra}, "steps": 3})
    cast = cluster(case_train, 2, {"kwargs": {"compression": CastingCompressor, **extra}, "steps": 3})
    for ours, theirs in zip(kept[0] + kept[1], cast[0] + cast[1], strict=True):
        assert torch.equal(ours, theirs)


def test_num_groups_is_deprecated() -> None:
    _, caught = cluster_warnings(case_train, 2, {"kwargs": {"num_groups": 2}})
    assert any(issubclass(w.category, DeprecationWarning) and "num_groups" in str(w.message) for w in caught)
    check({"kwargs": {"groups": 2}}, 2)


# --- misuse -----------------------------------------------------------------------------------------


def case_misuse() -> None:
    hvd.init()
    model = Net()

    def wrap(**kwargs):
        return hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), **kwargs)

    named = list(model.named_parameters())
    expect_error(
        ValueError,
        ("must be unique", "fc1.weight"),
        lambda: wrap(named_parameters=[named[0], ("fc1.weight", named[1][1]), *named[2:]]),
    )
    expect_error(ValueError, ("were not named",), lambda: wrap(named_parameters=named[1:]))
    expect_error(ValueError, ("tuples",), lambda: wrap(named_parameters=[p for _, p in named]))
    expect_error(ValueError, ("gradient_predivide_factor",), lambda: wrap(op=hvd.Sum, gradient_predivide_factor=2.0))
    expect_error(ValueError, ("only appear once",), lambda: wrap(groups=[[model.fc1.weight], [model.fc1.weight]]))

    opt = wrap(named_parameters=model.named_parameters())
    loss_of(model, *batch(0, hvd.rank())).backward()
    expect_error(AssertionError, ("zero_grad() was called after loss.backward()",), opt.zero_grad)
    opt.step()
    opt.zero_grad()
    # Stepping after an explicit synchronize() without skip_synchronize() warns (and still works).
    loss_of(model, *batch(1, hvd.rank())).backward()
    opt.synchronize()
    opt.step()  # (the warning is recorded around the cluster by the test: filters are process-wide)
    # More backward passes than backward_passes_per_step before step() is an error.
    opt.zero_grad()
    loss_of(model, *batch(2, hvd.rank())).backward()
    expect_error(
        AssertionError,
        ("more than backward_passes_per_step",),
        lambda: loss_of(model, *batch(3, hvd.rank())).backward(),
    )
    hvd.barrier()  # every rank is done with its allreduces before any shuts down


def test_misuse_is_reported() -> None:
    _, caught = cluster_warnings(case_misuse, 2)
    assert any("skip_synchronize" in str(w.message) for w in caught), [str(w.message) for w in caught]


def case_accumulation_guard() -> None:
    hvd.init()
    model = Net()
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1),
        named_parameters=model.named_parameters(),
        backward_passes_per_step=2,
    )
    loss_of(model, *batch(0, hvd.rank())).backward()
    # Zeroing between the accumulated passes would lose the first pass: refused, as in Horovod.
    expect_error(AssertionError, ("zero_grad",), opt.zero_grad)
    loss_of(model, *batch(1, hvd.rank())).backward()
    opt.step()
    opt.zero_grad()


def test_zero_grad_between_accumulated_passes_is_refused() -> None:
    cluster(case_accumulation_guard, 2)


# --- sparse gradients, schedulers, process sets -----------------------------------------------------


class Bag(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(10, 4, sparse=True)
        self.head = torch.nn.Linear(4, 2)
        with torch.no_grad():
            for i, p in enumerate(self.parameters()):
                p.copy_(seeded(tuple(p.shape), seed=2000 + i, dtype=torch.float32))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embedding(ids).mean(1))


def bag_batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randint(0, 10, (3, 2), generator=g), torch.randint(0, 2, (3,), generator=g)


def case_sparse(sparse_as_dense: bool) -> list[torch.Tensor]:
    hvd.init()
    model = Bag()
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.5),
        named_parameters=model.named_parameters(),
        sparse_as_dense=sparse_as_dense,
    )
    for step in range(3):
        opt.zero_grad()
        ids, y = bag_batch(step, hvd.rank())
        torch.nn.functional.cross_entropy(model(ids), y).backward()
        assert model.embedding.weight.grad.is_sparse
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_sparse_gradients(sparse_as_dense: bool) -> None:
    n = 2
    results = cluster(case_sparse, n, sparse_as_dense)
    model = Bag()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for step in range(3):
        opt.zero_grad()
        for rank in range(n):
            ids, y = bag_batch(step, rank)
            (torch.nn.functional.cross_entropy(model(ids), y) / n).backward()
        opt.step()
    for got_rank0, got_rank1, want in zip(results[0], results[1], model.parameters(), strict=True):
        assert torch.equal(got_rank0, got_rank1)
        assert torch.allclose(got_rank0, want.detach(), atol=1e-6), (got_rank0 - want).abs().max()


def case_scheduler_and_state_dict() -> float:
    hvd.init()
    model = Net()
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters()
    )
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for step in range(2):
        opt.zero_grad()
        loss_of(model, *batch(step, hvd.rank())).backward()
        opt.step()
        scheduler.step()
    state = opt.state_dict()
    opt.load_state_dict(state)
    return opt.param_groups[0]["lr"]


def test_lr_scheduler_and_state_dict() -> None:
    assert cluster(case_scheduler_and_state_dict, 2) == [0.025, 0.025]


def case_process_set() -> list[torch.Tensor]:
    first_two = hvd.ProcessSet([0, 1])
    hvd.init(process_sets=[first_two])
    rank = hvd.rank()
    model = Net()
    opt = hvd.DistributedOptimizer(
        make_optimizer("sgd", model.parameters()), named_parameters=model.named_parameters(), process_set=first_two
    )
    for step in range(2):
        opt.zero_grad()
        loss_of(model, *batch(step, rank)).backward()
        opt.step()
    hvd.barrier()  # shutting down stops every rank's engine: rank 2 waits for the others
    return [p.detach().clone() for p in model.parameters()]


def test_process_set_averages_within_the_set() -> None:
    results = cluster(case_process_set, 3)
    assert all(torch.equal(a, b) for a, b in zip(results[0], results[1], strict=True))
    expected = reference(2, {"steps": 2})
    assert all(torch.allclose(a, b, atol=1e-10) for a, b in zip(results[0], expected, strict=True))
    # Rank 2 is outside the set: it trained on its own data alone.
    assert not all(torch.allclose(a, b) for a, b in zip(results[2], results[0], strict=True))


def case_rewrapping() -> list[torch.Tensor]:
    """Wrapping the same parameters again (e.g. after a restart) leaves no hook of the old wrapper."""
    import gc

    hvd.init()
    model = Net()
    for _ in range(2):
        opt = hvd.DistributedOptimizer(
            make_optimizer("sgd", model.parameters()), named_parameters=model.named_parameters()
        )
        del opt
        gc.collect()
    opt = hvd.DistributedOptimizer(make_optimizer("sgd", model.parameters()), named_parameters=model.named_parameters())
    for step in range(4):
        opt.zero_grad()
        loss_of(model, *batch(step, hvd.rank())).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def test_rewrapping_the_same_parameters() -> None:
    results = cluster(case_rewrapping, 2)
    assert all(torch.allclose(a, b, atol=1e-10) for a, b in zip(results[0], reference(2, {}), strict=True))


# --- op=hvd.Adasum: the delta optimizer ---------------------------------------------------------------


def adasum_reference(n: int, config: dict) -> list[torch.Tensor]:
    """What the delta optimizer does, in one process: each of the n ranks steps its own optimizer
    (its own state) from the shared parameters on its own batch; the shared parameters then move
    by the Adasum of the ranks' changes (the numpy reference), parameter by parameter."""
    kwargs = config.get("kwargs", {})
    passes = kwargs.get("backward_passes_per_step", 1)
    shared = Net()
    copies = [Net() for _ in range(n)]
    optimizers = [make_optimizer(config.get("optimizer", "sgd"), c.parameters()) for c in copies]
    for step in range(config.get("steps", 4)):
        deltas = []
        for rank, (copy, opt) in enumerate(zip(copies, optimizers, strict=True)):
            with torch.no_grad():
                for p, q in zip(copy.parameters(), shared.parameters(), strict=True):
                    p.copy_(q)
            opt.zero_grad()
            for micro in range(passes):
                x, y = batch(step, rank, micro)
                use_extra = not (config.get("unused_on_last_rank") and rank == n - 1)
                loss_of(copy, x, y, use_extra).backward()
            opt.step()
            deltas.append(
                [p.detach() - q.detach() for p, q in zip(copy.parameters(), shared.parameters(), strict=True)]
            )
        with torch.no_grad():
            for i, q in enumerate(shared.parameters()):
                q.add_(torch.from_numpy(combine([d[i].numpy() for d in deltas]).reshape(q.shape)))
    return [p.detach().clone() for p in shared.parameters()]


@pytest.mark.parametrize("np_", [2, 3])
@pytest.mark.parametrize(
    "config",
    [
        {"optimizer": "sgd"},
        {"optimizer": "adam"},
        {"optimizer": "adam", "kwargs": {"backward_passes_per_step": 2}},
        {"kwargs": {"groups": 2}},
        {"unused_on_last_rank": True},
    ],
    ids=lambda c: str(c).replace(" ", ""),
)
def test_adasum_delta_optimizer(np_: int, config: dict) -> None:
    config = {**config, "kwargs": {**config.get("kwargs", {}), "op": hvd.Adasum}}
    results = cluster(case_train, np_, config)
    for other in results[1:]:
        for a, b in zip(results[0], other, strict=True):
            assert torch.equal(a, b), "ranks hold different parameters"
    for got, want in zip(results[0], adasum_reference(np_, config), strict=True):
        assert torch.allclose(got, want, atol=1e-10, rtol=1e-10), (got - want).abs().max()


def case_adasum_skip_synchronize() -> None:
    hvd.init()
    model = Net()
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters(), op=hvd.Adasum
    )
    expect_error(AssertionError, ("Adasum",), opt.skip_synchronize)


def test_adasum_refuses_skip_synchronize() -> None:
    cluster(case_adasum_skip_synchronize, 2)
