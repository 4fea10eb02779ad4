"""hvd-torch on CUDA tensors, 2 ranks sharing one GPU (ranks as threads, hvd-core's in-memory
backend): the engine stages them through host memory, after the current stream's work, and the
current stream waits for the results. Every result equals the same collective on CPU tensors. Then
one rank on NCCL (hvd-backend-nccl, where installed: NCCL takes one rank per GPU), the same way.

Skipped without a GPU; ./dev gpu-check runs it on one. The engine's side of this path is tested
everywhere on the simulated device (hvd-core's tests/test_device_staging.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import horovod.torch as hvd
from hvdtorch_testutil import ALL_DTYPES, cluster, contribution, ops_for

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

# Two ranks on one GPU: staged through the CPU backend (the cluster's in-memory one), as NCCL cannot
# have them in one communicator.
STAGED = {"HOROVOD_GPU_OPERATIONS": "inmemory"}
ON_NCCL = {"HOROVOD_GPU_OPERATIONS": "NCCL"}
needs_nccl = pytest.mark.skipif(not hvd.nccl_built(), reason="hvd-backend-nccl is not installed")


def _both(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``fn`` of ``x`` on the GPU (its result checked to be there, and brought back) and on the CPU."""
    on_gpu = fn(x.cuda())
    assert on_gpu.device.type == "cuda", on_gpu.device
    return on_gpu.cpu(), fn(x)


def _check_every_collective(dtype: torch.dtype, n: int, rank: int) -> None:
    tag = str(dtype).replace("torch.", "")
    x = contribution(rank, (3, 5), dtype, small=True)
    for op in ops_for(dtype):
        gpu, cpu = _both(lambda t, o=op: hvd.allreduce(t, op=o, name=f"ar.{tag}.{o}.{t.device.type}"), x)
        assert torch.equal(gpu, cpu), (dtype, op, gpu, cpu)
    rows = contribution(rank, (rank + 1, 2), dtype)
    gpu, cpu = _both(lambda t: hvd.allgather(t, name=f"ag.{tag}.{t.device.type}"), rows)
    assert torch.equal(gpu, cpu), (dtype, "allgather")
    gpu, cpu = _both(lambda t: hvd.broadcast(t, root_rank=n - 1, name=f"bc.{tag}.{t.device.type}"), x)
    assert torch.equal(gpu, cpu), (dtype, "broadcast")
    block = contribution(rank, (2 * n, 3), dtype)
    gpu, cpu = _both(lambda t: hvd.alltoall(t, name=f"a2a.{tag}.{t.device.type}"), block)
    assert torch.equal(gpu, cpu), (dtype, "alltoall")
    if dtype != torch.bool:
        gpu, cpu = _both(lambda t: hvd.reducescatter(t, op=hvd.Sum, name=f"rs.{tag}.{t.device.type}"), block)
        assert torch.equal(gpu, cpu), (dtype, "reducescatter")


def case_every_collective_on_cuda() -> None:
    hvd.init()
    for dtype in ALL_DTYPES:
        _check_every_collective(dtype, hvd.size(), hvd.rank())


def test_every_collective_and_dtype_on_cuda_tensors() -> None:
    cluster(case_every_collective_on_cuda, 2, env=STAGED)


def case_async_handles_and_groups_on_cuda() -> None:
    hvd.init()
    rank, n = hvd.rank(), hvd.size()
    summed = [n * k + n * (n - 1) // 2 for k in range(8)]  # of rank + k over the ranks
    xs = [torch.full((100 + k,), float(rank + k), device="cuda") for k in range(8)]
    handles = [hvd.allreduce_async_(x, op=hvd.Sum, name=f"async.{k}") for k, x in enumerate(xs)]
    for h in handles:
        hvd.synchronize(h)
    for k, x in enumerate(xs):
        assert x.device.type == "cuda" and torch.all(x.cpu() == float(summed[k])), (k, x)
    grouped = hvd.grouped_allreduce([x * 2 for x in xs[:3]], op=hvd.Average, name="group")
    for k, g in enumerate(grouped):
        assert torch.allclose(g.cpu(), torch.full((100 + k,), float(2 * summed[k]))), (k, g)
    # Work queued on the current stream after the collective sees its result, with no host sync.
    y = torch.ones(1 << 20, device="cuda") * (rank + 1)
    z = hvd.allreduce(y, op=hvd.Sum, name="ordered") * 2
    assert torch.all(z.cpu() == float(n * (n + 1)))


def test_async_handles_groups_and_stream_order_on_cuda() -> None:
    cluster(case_async_handles_and_groups_on_cuda, 2, env=STAGED)


def case_optimizer_step_equals_its_cpu_result(device: str) -> list[float]:
    hvd.init()
    # Ranks are threads of one process, whose global random state they would share: every random
    # number comes from a generator of its own (the same start on every rank, data per rank).
    start, data = torch.Generator().manual_seed(1234), torch.Generator().manual_seed(99 + hvd.rank())
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=start))
    model.to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters()
    )
    for _ in range(3):
        x, target = torch.randn(4, 8, generator=data), torch.randn(4, 1, generator=data)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x.to(device)), target.to(device)).backward()
        optimizer.step()
    return [p.detach().cpu().double().sum().item() for p in model.parameters()]


def test_the_distributed_optimizer_on_cuda_equals_its_cpu_result() -> None:
    on_cpu = cluster(case_optimizer_step_equals_its_cpu_result, 2, "cpu")
    on_gpu = cluster(case_optimizer_step_equals_its_cpu_result, 2, "cuda", env=STAGED)
    assert on_gpu[0] == on_gpu[1], "the ranks' models differ"
    assert on_gpu[0] == pytest.approx(on_cpu[0], rel=1e-4), (on_gpu, on_cpu)


def case_state_objects_and_sync_batch_norm(device: str) -> list[float]:
    """SyncBatchNorm's forward and backward, the broadcast of an object and of an optimizer's state,
    and elastic TorchState's sync, commit and restore, on `device`: as numbers to compare."""
    hvd.init()
    rank = hvd.rank()
    data = torch.Generator().manual_seed(7 + rank)
    bn = hvd.SyncBatchNorm(3).to(device)
    x = (torch.randn(rank + 2, 3, 4, generator=data) * 2 + 1).to(device).requires_grad_()
    out = bn(x)
    upstream = torch.linspace(-1.0, 2.0, out.numel(), device=device).reshape(out.shape)
    (out * upstream).sum().backward()
    numbers = [(out * out).sum().item(), x.grad.abs().sum().item(), bn.running_mean.sum().item()]
    obj = hvd.broadcast_object({"rank": rank, "t": torch.full((2,), float(rank), device=device)}, root_rank=0)
    assert obj["t"].device.type == device
    numbers += [float(obj["rank"]), obj["t"].sum().item()]
    model = torch.nn.Linear(4, 2).to(device)
    with torch.no_grad():
        model.weight.fill_(float(rank + 1))
        model.bias.fill_(0.5)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.ones(1, 4, device=device)).sum().backward()
    optimizer.step()  # momentum buffers, different on each rank
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    numbers += [v["momentum_buffer"].sum().item() for v in optimizer.state_dict()["state"].values()]
    state = hvd.elastic.TorchState(model, optimizer, epoch=rank)
    state.sync()  # everyone takes rank 0's
    numbers += [model.weight.sum().item(), float(state.epoch)]
    state.commit()
    with torch.no_grad():
        model.weight.mul_(0.0)
    state.restore()
    assert model.weight.device.type == device
    numbers.append(model.weight.sum().item())
    return numbers


def test_state_objects_and_sync_batch_norm_on_cuda_equal_their_cpu_result() -> None:
    on_cpu = cluster(case_state_objects_and_sync_batch_norm, 2, "cpu")
    on_gpu = cluster(case_state_objects_and_sync_batch_norm, 2, "cuda", env=STAGED)
    for gpu, cpu in zip(on_gpu, on_cpu, strict=True):
        assert gpu == pytest.approx(cpu, rel=1e-4, abs=1e-5), (gpu, cpu)


def case_on_nccl(device: str) -> tuple[str | None, list[float]]:
    from horovod.common.testing.probes import engine_stats, running_gpu_backend

    params = case_optimizer_step_equals_its_cpu_result(device)
    params += case_state_objects_and_sync_batch_norm(device)
    case_every_collective_on_cuda()
    case_async_handles_and_groups_on_cuda()
    if device == "cuda":
        assert engine_stats()["device_backend_calls"] > 0
    return running_gpu_backend(), params


@needs_nccl
def test_one_rank_on_nccl_equals_its_cpu_result() -> None:
    [(backend, on_gpu)] = cluster(case_on_nccl, 1, "cuda", env=ON_NCCL)
    [(_, on_cpu)] = cluster(case_on_nccl, 1, "cpu", env=ON_NCCL)
    assert backend == "nccl"
    assert on_gpu == pytest.approx(on_cpu, rel=1e-4), (on_gpu, on_cpu)
