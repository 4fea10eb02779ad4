"""SyncBatchNorm equals torch's BatchNorm on the concatenation of every rank's batch."""

from __future__ import annotations

import pytest
import torch

import horovod.torch as hvd
from hvdtorch_testutil import cluster, seeded

C = 3


def batch_of(rank: int, step: int, spatial: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    # Uneven batch sizes (rank r has r + 2 samples) and a non-zero mean per channel.
    x = seeded((rank + 2, C, *spatial), seed=100 * step + rank, dtype=dtype)
    return x * 2 + torch.arange(C, dtype=dtype).view(1, C, *([1] * len(spatial)))


def upstream(rank: int, step: int, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
    return seeded(tuple(shape), seed=5000 + 100 * step + rank, dtype=dtype)


def init_affine(module: torch.nn.Module, dtype: torch.dtype) -> None:
    if module.affine:
        with torch.no_grad():
            module.weight.copy_(1 + 0.5 * seeded((C,), seed=7, dtype=dtype))
            module.bias.copy_(seeded((C,), seed=8, dtype=dtype))


def case_sync_bn(config: dict) -> list:
    hvd.init()
    rank = hvd.rank()
    dtype = config["dtype"]
    bn = hvd.SyncBatchNorm(
        C, momentum=config["momentum"], affine=config["affine"], track_running_stats=config["track"]
    ).to(dtype)
    init_affine(bn, dtype)
    steps = []
    for step in range(config["steps"]):
        x = batch_of(rank, step, config["spatial"], dtype).requires_grad_()
        out = bn(x)
        (upstream(rank, step, out.shape, dtype) * out).sum().backward()
        grads = {"x": x.grad.clone()}
        if config["affine"]:
            # Weight and bias gradients are local: their sum over ranks is the whole batch's.
            grads["weight"] = hvd.allreduce(bn.weight.grad, op=hvd.Sum, name=f"w.{step}")
            grads["bias"] = hvd.allreduce(bn.bias.grad, op=hvd.Sum, name=f"b.{step}")
            bn.weight.grad = bn.bias.grad = None
        steps.append({"out": out.detach(), **grads})
    bn.eval()
    x = batch_of(rank, 99, config["spatial"], dtype)
    evaluation = bn(x).detach()
    buffers = {
        k: v.clone() for k, v in bn.state_dict().items() if k.startswith("running") or k == "num_batches_tracked"
    }
    return [steps, evaluation, buffers]


def reference(n: int, config: dict) -> list:
    dtype = config["dtype"]
    cls = {0: torch.nn.BatchNorm1d, 1: torch.nn.BatchNorm1d, 2: torch.nn.BatchNorm2d, 3: torch.nn.BatchNorm3d}
    bn = cls[len(config["spatial"])](
        C, momentum=config["momentum"], affine=config["affine"], track_running_stats=config["track"]
    ).to(dtype)
    init_affine(bn, dtype)
    per_rank = [[] for _ in range(n)]
    for step in range(config["steps"]):
        xs = [batch_of(r, step, config["spatial"], dtype) for r in range(n)]
        x = torch.cat(xs).requires_grad_()
        out = bn(x)
        outs = out.split([len(t) for t in xs])
        sum((upstream(r, step, o.shape, dtype) * o).sum() for r, o in enumerate(outs)).backward()
        x_grads = x.grad.split([len(t) for t in xs])
        for r in range(n):
            entry = {"out": outs[r].detach(), "x": x_grads[r]}
            if config["affine"]:
                entry["weight"], entry["bias"] = bn.weight.grad.clone(), bn.bias.grad.clone()
            per_rank[r].append(entry)
        bn.zero_grad()
    bn.eval()
    xs = [batch_of(r, 99, config["spatial"], dtype) for r in range(n)]
    evaluations = bn(torch.cat(xs)).detach().split([len(t) for t in xs])
    buffers = {
        k: v.clone() for k, v in bn.state_dict().items() if k.startswith("running") or k == "num_batches_tracked"
    }
    return [[per_rank[r], evaluations[r], buffers] for r in range(n)]


def check(config: dict, np_: int) -> None:
    tolerance = 1e-10 if config["dtype"] == torch.float64 else 2e-5
    got, expected = cluster(case_sync_bn, np_, config), reference(np_, config)
    for rank in range(np_):
        (steps, evaluation, buffers), (want_steps, want_eval, want_buffers) = got[rank], expected[rank]
        for step, (entry, want) in enumerate(zip(steps, want_steps, strict=True)):
            assert entry.keys() == want.keys()
            for key in entry:
                assert torch.allclose(entry[key], want[key], atol=tolerance, rtol=tolerance), (
                    f"rank {rank} step {step} {key}: max diff {(entry[key] - want[key]).abs().max()}"
                )
        assert torch.allclose(evaluation, want_eval, atol=tolerance, rtol=tolerance), f"rank {rank}: evaluation"
        assert buffers.keys() == want_buffers.keys()
        for key in buffers:
            assert torch.allclose(buffers[key].double(), want_buffers[key].double(), atol=tolerance), (rank, key)


BASE = {"dtype": torch.float64, "momentum": 0.1, "affine": True, "track": True, "steps": 3, "spatial": (4,)}


@pytest.mark.parametrize("np_", [2, 3])
@pytest.mark.parametrize("spatial", [(), (4,), (2, 3), (2, 2, 2)], ids=["1d-NC", "1d-NCL", "2d", "3d"])
def test_matches_batch_norm_on_the_whole_batch(np_: int, spatial: tuple) -> None:
    check({**BASE, "spatial": spatial}, np_)


@pytest.mark.parametrize(
    "changes",
    [
        {"affine": False},
        {"track": False},  # batch statistics in evaluation too: synchronised there as well
        {"momentum": None},  # cumulative moving average
        {"dtype": torch.float32},
    ],
    ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()),
)
def test_options(changes: dict) -> None:
    check({**BASE, **changes}, 3)


def test_single_rank_is_batch_norm() -> None:
    check(BASE, 1)


def case_too_small() -> None:
    hvd.init()
    bn = hvd.SyncBatchNorm(C)
    try:
        bn(torch.ones(1 if hvd.rank() == 0 else 0, C))
    except ValueError as error:
        assert "more than 1 value per channel" in str(error)
    else:
        raise AssertionError("a batch of one sample was accepted")
    try:
        bn(torch.ones(C))
    except ValueError as error:
        assert "at least 2D" in str(error)
    else:
        raise AssertionError("a 1-D input was accepted")


def test_errors() -> None:
    cluster(case_too_small, 2)
