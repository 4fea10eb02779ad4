"""Data-parallel training of a small Gluon MLP on scikit-learn's digits with horovod.mxnet.

A normal Horovod MXNet script: each rank trains on its shard of the data, DistributedTrainer
averages the gradients, and broadcast_parameters makes every rank start from rank 0's weights
(here at the first forward pass: the first layer's input size is inferred, so its initialisation
is deferred until then).

    horovodrun -np 2 python examples/mxnet/mxnet_digits.py

Started without a launcher it trains alone (one rank).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

with warnings.catch_warnings():  # mxnet 1.9 uses numpy aliases that numpy deprecates
    warnings.simplefilter("ignore", DeprecationWarning)
    import mxnet as mx
    from mxnet import autograd, gluon, nd

import horovod.mxnet as hvd


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="horovod.mxnet: Gluon MLP on scikit-learn's digits")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05, help="per rank; scaled by the number of ranks")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--seed", type=int, default=42)
    return parser.parse_args(argv)


def load_data(seed: int) -> tuple[np.ndarray, ...]:
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.float32)
    return tuple(train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y))


def shard(length: int, epoch: int, seed: int) -> np.ndarray:
    """This rank's part of the epoch: one shuffle every rank computes alike, padded to a multiple of
    the ranks (so that every rank takes the same number of steps), every size-th index from rank."""
    order = np.random.RandomState(seed + epoch).permutation(length)
    padded = np.concatenate([order, order[: (-length) % hvd.size()]])
    return padded[hvd.rank() :: hvd.size()]


def evaluate(net: gluon.Block, x: np.ndarray, y: np.ndarray) -> float:
    """Test accuracy over the whole test set, each rank scoring every size-th sample."""
    mine = slice(hvd.rank(), None, hvd.size())
    predicted = net(nd.array(x[mine])).argmax(axis=1).asnumpy()
    counts = nd.array([float((predicted == y[mine]).sum()), float(len(y[mine]))], dtype="float64")
    totals = hvd.allreduce(counts, op=hvd.Sum, name="eval.totals").asnumpy()
    return float(totals[0] / totals[1])


def main(args: argparse.Namespace) -> dict:
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    x_train, x_test, y_train, y_test = load_data(args.seed)

    # Each rank starts from different random weights; broadcast_parameters makes them rank 0's.
    mx.random.seed(args.seed + rank)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(args.hidden, activation="relu"), gluon.nn.Dense(10))  # input size: deferred
    net.initialize(mx.init.Xavier())
    net.hybridize()
    hvd.broadcast_parameters(net.collect_params(), root_rank=0, prefix="mlp.")

    trainer = hvd.DistributedTrainer(
        net.collect_params(), "sgd", {"learning_rate": args.lr * size, "momentum": args.momentum}
    )
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    start = time.perf_counter()
    for epoch in range(args.epochs):
        indices = shard(len(x_train), epoch, args.seed)
        total_loss, batches = 0.0, 0
        for i in range(0, len(indices), args.batch_size):
            batch = indices[i : i + args.batch_size]
            data, label = nd.array(x_train[batch]), nd.array(y_train[batch])
            with autograd.record():
                loss = loss_fn(net(data), label)
            loss.backward()
            trainer.step(len(batch))  # this rank's batch: the trainer averages over the ranks
            total_loss, batches = total_loss + float(loss.mean().asscalar()), batches + 1
        epoch_loss = float(hvd.allreduce(nd.array([total_loss / batches]), name="epoch.loss").asscalar())
        accuracy = evaluate(net, x_test, y_test)
        if rank == 0:
            print(
                f"epoch {epoch + 1:2d}/{args.epochs}  loss {epoch_loss:.4f}  test accuracy {accuracy:.4f}", flush=True
            )
    elapsed = time.perf_counter() - start

    # Every rank must hold identical weights: compare a checksum of them across ranks.
    flat = np.concatenate([p.data().asnumpy().ravel() for p in net.collect_params().values()]).astype(np.float64)
    checksum = nd.array([[flat.sum(), (flat * np.arange(1, flat.size + 1)).sum()]], dtype="float64")
    checksums = hvd.allgather(checksum, name="final.checksum").asnumpy()
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
    main(parse_args())
