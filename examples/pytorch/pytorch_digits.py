"""Data-parallel training of a small MLP on scikit-learn's digits with horovod.torch.

A normal Horovod PyTorch script: each rank trains on its shard of the data, DistributedOptimizer
averages the gradients, and rank 0's initial weights and optimizer state are broadcast first.

    horovodrun -np 2 python examples/pytorch/pytorch_digits.py

Also `mpirun -np 2 python examples/pytorch/pytorch_digits.py` with hvd-backend-mpi installed. Started
directly (no launcher), it runs --np ranks (default 2) as threads of this process, connected in
memory by hvd-core's test kit.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import horovod.torch as hvd


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="horovod.torch: MLP on scikit-learn's digits")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05, help="per rank; scaled by the number of ranks")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--use-adasum", action="store_true", help="combine the ranks' steps by Adasum (op=hvd.Adasum)")
    parser.add_argument("--np", type=int, default=2, help="ranks to run as threads when not started by a launcher")
    return parser.parse_args(argv)


class ShardSampler:
    """Like torch.utils.data.DistributedSampler: a shuffled, equally sized shard per rank and epoch."""

    def __init__(self, length: int, num_replicas: int, rank: int, seed: int = 0) -> None:
        self.length, self.num_replicas, self.rank, self.seed = length, num_replicas, rank, seed
        self.num_samples = math.ceil(length / num_replicas)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        order = torch.randperm(self.length, generator=torch.Generator().manual_seed(self.seed + self.epoch))
        order = torch.cat([order, order[: self.num_samples * self.num_replicas - self.length]])  # pad evenly
        return iter(order[self.rank :: self.num_replicas].tolist())

    def __len__(self) -> int:
        return self.num_samples


def load_data(seed: int) -> tuple[torch.Tensor, ...]:
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)
    return x_train, x_test, y_train, y_test


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Test accuracy over the whole test set, each rank scoring its shard."""
    shard = slice(hvd.rank(), None, hvd.size())
    model.eval()
    with torch.no_grad():
        correct = (model(x[shard]).argmax(1) == y[shard]).sum()
    model.train()
    totals = hvd.allreduce(torch.stack([correct, torch.tensor(len(y[shard]))]).double(), op=hvd.Sum, name="eval.totals")
    return float(totals[0] / totals[1])


def main(args: argparse.Namespace) -> dict:
    hvd.init()
    torch.set_num_threads(1)
    rank, size = hvd.rank(), hvd.size()
    x_train, x_test, y_train, y_test = load_data(args.seed)

    # Each rank starts from different random weights; broadcast_parameters makes them rank 0's.
    generator = torch.Generator().manual_seed(args.seed + rank)
    model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * (1.0 / math.sqrt(p.shape[-1])))

    # Averaged gradients take the learning rate scaled by the ranks; Adasum adapts the combined
    # step itself (from the sum of the ranks' steps, orthogonal, to their mean, parallel): unscaled.
    lr = args.lr if args.use_adasum else args.lr * size
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=args.momentum)
    op = hvd.Adasum if args.use_adasum else hvd.Average
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(), op=op)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    sampler = ShardSampler(len(x_train), size, rank, seed=args.seed)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        indices = list(sampler)
        total_loss, batches = 0.0, 0
        for i in range(0, len(indices), args.batch_size):
            batch = indices[i : i + args.batch_size]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x_train[batch]), y_train[batch])
            loss.backward()
            optimizer.step()
            total_loss, batches = total_loss + loss.item(), batches + 1
        epoch_loss = hvd.allreduce(torch.tensor(total_loss / batches), name="epoch.loss").item()
        accuracy = evaluate(model, x_test, y_test)
        if rank == 0:
            print(
                f"epoch {epoch + 1:2d}/{args.epochs}  loss {epoch_loss:.4f}  test accuracy {accuracy:.4f}", flush=True
            )
    elapsed = time.perf_counter() - start

    # Every rank must hold identical weights: compare a checksum of them across ranks.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double()
    checksum = torch.stack([flat.sum(), (flat * torch.arange(1, flat.numel() + 1, dtype=torch.float64)).sum()])
    checksums = hvd.allgather(checksum.unsqueeze(0), name="final.checksum")
    identical = bool((checksums == checksums[0]).all())
    if rank == 0:
        print(f"weight checksums per rank: {[f'{c[0]:.10f}/{c[1]:.6f}' for c in checksums.tolist()]}", flush=True)
        print(
            f"final test accuracy {accuracy:.4f} ({size} ranks, {args.epochs} epochs in {elapsed:.1f} s, "
            f"identical weights on every rank: {identical})",
            flush=True,
        )
    if not identical:
        raise RuntimeError(f"rank {rank}: weights differ between ranks: {checksums.tolist()}")
    hvd.shutdown()
    return {"accuracy": accuracy, "seconds": elapsed, "identical": identical}


if __name__ == "__main__":
    arguments = parse_args()
    # Started by horovodrun or by mpirun (Open MPI, MPICH/Hydra, PMIx): this process is one rank.
    if any(v in os.environ for v in ("HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")):
        main(arguments)
    else:
        from horovod.common.testing import run_cluster

        run_cluster(main, arguments.np, args=(arguments,), timeout=1200)
