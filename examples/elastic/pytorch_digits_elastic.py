"""Elastic data-parallel training of a small MLP on scikit-learn's digits with horovod.torch.

The job survives workers that die and grows when hosts appear: state is committed every few
batches, a lost worker makes the others restore the last commit and go on without it, and new
workers receive the state when they join. The ElasticSampler makes sure that a resize in the middle
of an epoch neither skips nor repeats a sample.

    horovodrun -np 2 --min-np 1 --max-np 4 --host-discovery-script examples/elastic/discover_hosts.sh \\
        python examples/elastic/pytorch_digits_elastic.py

``discover_hosts.sh`` prints the hosts listed in ``$HOSTS_FILE`` (default: ``localhost:2``); edit
that file while the job runs to add or remove slots. To see a recovery, ``--fail-worker 1
--fail-at-epoch 3`` makes worker 1 kill itself (SIGKILL) once, in the middle of epoch 3.
"""

from __future__ import annotations

import argparse
import os
import signal

import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import horovod.torch as hvd


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="horovod.torch elastic: MLP on scikit-learn's digits")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05, help="per rank; scaled by the number of ranks")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--batches-per-commit", type=int, default=4)
    parser.add_argument("--fail-worker", type=int, default=None, help="this worker kills itself once (demo)")
    parser.add_argument("--fail-at-epoch", type=int, default=3)
    return parser.parse_args(argv)


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


def weights_identical(model: nn.Module) -> bool:
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double()
    checksum = torch.stack([flat.sum(), (flat * torch.arange(1, flat.numel() + 1, dtype=torch.float64)).sum()])
    checksums = hvd.allgather(checksum.unsqueeze(0), name="final.checksum")
    return bool((checksums == checksums[0]).all())


def maybe_fail(args: argparse.Namespace, epoch: int, batch: int) -> None:
    """The demo fault: worker --fail-worker dies once, half-way through epoch --fail-at-epoch."""
    worker = os.environ.get("HOROVOD_ELASTIC_WORKER_ID")
    if args.fail_worker is None or worker != str(args.fail_worker) or epoch != args.fail_at_epoch or batch != 5:
        return
    print(f"worker {worker} (rank {hvd.rank()}): killing itself in epoch {epoch}, batch {batch}", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def main(args: argparse.Namespace) -> None:
    hvd.init()
    torch.set_num_threads(1)
    x_train, x_test, y_train, y_test = load_data(args.seed)
    dataset = torch.utils.data.TensorDataset(x_train, y_train)

    torch.manual_seed(args.seed)  # every worker builds the same model; new ones get the state anyway
    model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=args.momentum)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=args.seed)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    state = hvd.elastic.TorchState(model, optimizer, train_sampler=sampler, epoch=0, accuracy=0.0)

    def on_reset() -> None:
        # The world changed size: keep the learning rate proportional to the number of workers.
        for group in optimizer.param_groups:
            group["lr"] = args.lr * hvd.size()
        if hvd.rank() == 0:
            print(f"reset: {hvd.size()} worker(s) now, resuming epoch {state.epoch + 1}", flush=True)

    state.register_reset_callbacks([on_reset])

    @hvd.elastic.run
    def train(state: hvd.elastic.TorchState) -> None:
        # Horovod's idiom: the epoch lives in the state, so a reset resumes the epoch it was in.
        for state.epoch in range(state.epoch, args.epochs):  # noqa: B020
            for batch, (x, y) in enumerate(loader):
                maybe_fail(args, state.epoch, batch)
                optimizer.zero_grad()
                F.cross_entropy(model(x), y).backward()
                optimizer.step()
                state.train_sampler.record_batch(batch, args.batch_size)
                if batch % args.batches_per_commit == 0:
                    state.commit()
            state.accuracy = evaluate(model, x_test, y_test)
            if hvd.rank() == 0:
                print(
                    f"epoch {state.epoch + 1:2d}/{args.epochs}  {hvd.size()} worker(s)  test accuracy "
                    f"{state.accuracy:.4f}",
                    flush=True,
                )
            state.train_sampler.set_epoch(state.epoch + 1)
            state.commit()

    train(state)
    identical = weights_identical(model)
    if hvd.rank() == 0:
        print(
            f"final test accuracy {state.accuracy:.4f} ({hvd.size()} workers at the end, identical weights on "
            f"every worker: {identical})",
            flush=True,
        )
    if not identical:
        raise RuntimeError(f"rank {hvd.rank()}: weights differ between workers")
    hvd.shutdown()


if __name__ == "__main__":
    main(parse_args())
