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


def mlp() -> nn.Module:
    return nn.Sequential(
        nn.Flatten(), nn.Linear(3 * 32 * 32, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
    )


MODELS = {"cnn": SmallCNN, "mlp": mlp}
FRAMEWORKS = ("hvd", "ddp", "local", "lockstep")


def make_step(model_name: str, framework: str, args):
    """One training step of `model_name` under hvd's DistributedOptimizer, torch DDP, or alone."""
    torch.manual_seed(0)
    model = MODELS[model_name]()
    data = torch.randn(args.batch_size, 3, 32, 32)
    target = torch.randint(0, 10, (args.batch_size,))
    if framework == "hvd":
        optimizer = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.01), named_parameters=model.named_parameters()
        )
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        net = model
    elif framework == "ddp":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        net = nn.parallel.DistributedDataParallel(model)
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
    args = parser.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{os.environ['HVD_BENCH_TORCH_PORT']}",
        rank=hvd.rank(),
        world_size=hvd.size(),
    )
    results = {}
    for model_name in MODELS:
        steps = {framework: make_step(model_name, framework, args) for framework in FRAMEWORKS}
        measured = images_per_second(steps, args.batch_size, args.warmup, args.iters, args.batches_per_iter)
        for framework, rate in measured.items():
            rates = hvd.allgather(torch.tensor([rate]), name=f"rates.{model_name}.{framework}")
            results[f"{model_name}.{framework}"] = {"per_rank": rates.tolist(), "total": float(rates.sum())}
    if hvd.rank() == 0:
        with open(args.out, "w") as f:
            json.dump({"ranks": hvd.size(), "results": results, "load": os.getloadavg()[:2]}, f)
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
