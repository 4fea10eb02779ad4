"""Synthetic training throughput: hvd's DistributedOptimizer beside torch DDP, same model and data.

Run under the launcher with 1 and with N ranks; rank 0 writes images/s (per rank and total) for
each model to --out. Batch 32, one intra-op thread per rank. hvd and DDP are measured in
alternating blocks in the same processes, beside the same step with no communication at all
("local"): N processes computing side by side on this machine, the most any data-parallel
framework can reach here (shared cores, caches and memory bandwidth included). A fourth row,
"lockstep", is the local step followed by a 4-byte allreduce: no gradients move, but the ranks
meet once per step, as every synchronous data-parallel step does. Where step times vary from step
to step, each rank then waits for the slower one; lockstep measures what that alone costs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import horovod.torch as hvd
from collectives import init_torch_gloo


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 8 * 8, 256)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a shortcut (a 1x1 convolution where the shape changes)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


def resnet18() -> nn.Module:
    """ResNet-18's layout (11.2M parameters, the gradients Horovod's synthetic benchmark reduces),
    on 32x32 inputs so that a step takes seconds, not minutes, on this machine's cores."""
    layers: list[nn.Module] = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10)]
    return nn.Sequential(*layers)


def mlp() -> nn.Module:
    return nn.Sequential(
        nn.Flatten(), nn.Linear(3 * 32 * 32, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
    )


MODELS = {"cnn": SmallCNN, "mlp": mlp, "resnet18": resnet18}
# The -fp16 ones reduce gradients in float16: hvd's Compression.fp16 (--fp16-allreduce in Horovod's
# synthetic benchmark), DDP's fp16_compress_hook.
FRAMEWORKS = ("hvd", "ddp", "local", "lockstep", "hvd-fp16", "ddp-fp16")


def make_step(model_name: str, framework: str, args):
    """One training step of `model_name` under hvd's DistributedOptimizer, torch DDP, or alone."""
    torch.manual_seed(0)
    model = MODELS[model_name]()
    data = torch.randn(args.batch_size, 3, 32, 32)
    target = torch.randint(0, 10, (args.batch_size,))
    if framework in ("hvd", "hvd-fp16"):
        compression = hvd.Compression.fp16 if framework == "hvd-fp16" else hvd.Compression.none
        optimizer = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.01),
            named_parameters=model.named_parameters(),
            compression=compression,
        )
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        net = model
    elif framework in ("ddp", "ddp-fp16"):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        net = nn.parallel.DistributedDataParallel(model)
        if framework == "ddp-fp16":
            from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import fp16_compress_hook

            net.register_comm_hook(None, fp16_compress_hook)
    else:  # "local" and "lockstep": each rank trains on its own, nothing is reduced
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        net = model
    meeting = torch.zeros(1)

    def step() -> None:
        optimizer.zero_grad()
        F.cross_entropy(net(data), target).backward()
        optimizer.step()
        if framework == "lockstep":
            hvd.allreduce_(meeting, name="lockstep", op=hvd.Sum)

    return step


def images_per_second(steps: dict, batch: int, warmup: int, iters: int, batches_per_iter: int) -> dict:
    """Median images/s of each framework's step, measured in alternating blocks: on a noisy machine
    both see the same background load, minute by minute."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    rates = {framework: [] for framework in steps}
    for _ in range(iters):
        for framework, step in steps.items():
            dist.barrier()  # every rank starts the block together
            start = time.perf_counter()
            for _ in range(batches_per_iter):
                step()
            rates[framework].append(batch * batches_per_iter / (time.perf_counter() - start))
    return {framework: statistics.median(r) for framework, r in rates.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=9)
    parser.add_argument("--batches-per-iter", type=int, default=5)
    parser.add_argument("--models", default="cnn,mlp", help=f"which of {', '.join(MODELS)}")
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="torch.set_num_threads; 0 leaves torch's own choice, as a script that sets nothing does",
    )
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS[:4]), help=f"which of {', '.join(FRAMEWORKS)}")
    args = parser.parse_args()
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    hvd.init()
    init_torch_gloo(hvd.rank(), hvd.size())  # on loopback, or across hosts at HVD_BENCH_TORCH_ADDR
    results = {}
    for model_name in args.models.split(","):
        steps = {framework: make_step(model_name, framework, args) for framework in args.frameworks.split(",")}
        measured = images_per_second(steps, args.batch_size, args.warmup, args.iters, args.batches_per_iter)
        for framework, rate in measured.items():
            rates = hvd.allgather(torch.tensor([rate]), name=f"rates.{model_name}.{framework}")
            results[f"{model_name}.{framework}"] = {"per_rank": rates.tolist(), "total": float(rates.sum())}
    if hvd.rank() == 0:
        with open(args.out, "w") as f:
            threads = {"torch": torch.get_num_threads(), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "")}
            json.dump({"ranks": hvd.size(), "results": results, "threads": threads, "load": os.getloadavg()[:2]}, f)
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
