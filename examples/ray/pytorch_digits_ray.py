"""Data-parallel training of a small MLP on scikit-learn's digits, on Ray, with horovod.ray.

RayExecutor starts the Horovod workers as Ray actors (placed by a placement group, ranks given by
node) and runs the training function in each; the function is an ordinary horovod.torch one.

    python examples/ray/pytorch_digits_ray.py --num-workers 2            # a local Ray cluster
    python examples/ray/pytorch_digits_ray.py --address 10.0.0.1:6379    # an existing one
"""

from __future__ import annotations

import argparse
import math

import ray

from horovod.ray import RayExecutor


def train(epochs: int, batch_size: int = 32, lr: float = 0.05, seed: int = 42) -> dict:
    """One worker's training (runs in a Ray actor)."""
    import torch
    import torch.nn.functional as F
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    import horovod.torch as hvd

    hvd.init()
    torch.set_num_threads(1)
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)

    torch.manual_seed(seed + hvd.rank())  # different initial weights: the broadcast makes them rank 0's
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr * hvd.size(), momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    shard = math.ceil(len(x_train) / hvd.size())
    for epoch in range(epochs):
        # As DistributedSampler does: one permutation, padded so that every rank has as many batches.
        order = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(seed + epoch))
        order = torch.cat([order, order[: shard * hvd.size() - len(order)]])
        mine = order[hvd.rank() :: hvd.size()]
        for i in range(0, shard, batch_size):
            batch = mine[i : i + batch_size]
            optimizer.zero_grad()
            F.cross_entropy(model(x_train[batch]), y_train[batch]).backward()
            optimizer.step()
    with torch.no_grad():
        correct = hvd.allreduce((model(x_test).argmax(1) == y_test).double().mean(), name="accuracy")
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double()
    checksum = float((flat * torch.arange(1, flat.numel() + 1, dtype=torch.float64)).sum())
    return {"rank": hvd.rank(), "accuracy": float(correct), "checksum": checksum}


def train_on_ray(num_workers: int, epochs: int) -> list[dict]:
    """Runs ``train`` on ``num_workers`` Ray workers (Ray must be initialised); results by rank."""
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=60), num_workers=num_workers, cpus_per_worker=1)
    executor.start()
    try:
        return executor.run(train, kwargs={"epochs": epochs})
    finally:
        executor.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="horovod.ray: MLP on scikit-learn's digits")
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--address", default=None, help="an existing Ray cluster (default: start one here)")
    args = parser.parse_args()
    ray.init(address=args.address) if args.address else ray.init(num_cpus=args.num_workers)
    for result in train_on_ray(args.num_workers, args.epochs):
        print(
            f"rank {result['rank']}: test accuracy {result['accuracy']:.4f}, weight checksum {result['checksum']:.6f}"
        )
    ray.shutdown()
