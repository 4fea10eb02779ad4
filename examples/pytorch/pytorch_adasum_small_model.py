"""Adasum against averaging on a small problem: fitting the coefficients of a quadratic with SGD.

Each rank draws its own points x, uniform in [-x_max, x_max], and their exact labels
y = c0 + c1 x + c2 x^2 of fixed true coefficients; the model is the three coefficients. Training
stops when the loss has been below --tolerance for two steps in a row, or after --max-steps. The
same script with ``--op average`` (the learning rate scaled by the ranks, as averaged gradients
need) and ``--op adasum`` (one rank's learning rate) shows how many steps each takes::

    horovodrun -np 2 python pytorch_adasum_small_model.py --op adasum
    python pytorch_adasum_small_model.py --op average --np 2     # ranks as threads, no launcher

Rank 0 prints the steps taken, the coefficients found and whether every rank holds the same ones.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

import horovod.torch as hvd

TRUE_COEFFICIENTS = (0.5, -1.0, 2.0)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", choices=("adasum", "average"), default="adasum")
    parser.add_argument("--lr", type=float, default=0.05, help="one rank's learning rate")
    parser.add_argument("--x-max", type=float, default=1.0, help="the points' range: harder as it grows")
    parser.add_argument("--batch-size", type=int, default=16, help="points per rank and step")
    parser.add_argument("--tolerance", type=float, default=1e-12, help="the loss to stop at")
    parser.add_argument("--max-steps", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--np", type=int, default=2, help="ranks to run as threads when not started by a launcher")
    return parser.parse_args(argv)


def features(x: torch.Tensor) -> torch.Tensor:
    return torch.stack([torch.ones_like(x), x, x * x], dim=1)


def main(args: argparse.Namespace) -> dict:
    hvd.init()
    torch.set_num_threads(1)
    rank, size = hvd.rank(), hvd.size()
    generator = torch.Generator().manual_seed(args.seed + rank)
    truth = torch.tensor(TRUE_COEFFICIENTS, dtype=torch.float64)
    coefficients = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    adasum = args.op == "adasum"
    # Averaged gradients shrink each rank's share: their learning rate is scaled by the ranks.
    lr = args.lr if adasum else args.lr * size
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD([coefficients], lr=lr),
        named_parameters=[("coefficients", coefficients)],
        op=hvd.Adasum if adasum else hvd.Average,
    )
    below, step = 0, 0
    while step < args.max_steps and below < 2:
        x = (torch.rand(args.batch_size, generator=generator, dtype=torch.float64) * 2 - 1) * args.x_max
        inputs = features(x)
        optimizer.zero_grad()
        loss = (inputs @ coefficients - inputs @ truth).square().mean()
        loss.backward()
        optimizer.step()
        step += 1
        # Every rank stops at the same step: on the largest of the ranks' losses.
        worst = hvd.allreduce(loss.detach(), op=hvd.Max, name="loss.max").item()
        below = below + 1 if worst < args.tolerance else 0
    found = coefficients.detach()
    every = hvd.allgather(found.unsqueeze(0), name="coefficients")
    identical = bool((every == every[0]).all())
    error = float((found - truth).abs().max())
    if rank == 0:
        print(
            f"op={args.op}: {step} steps on {size} ranks (lr {lr:g}), coefficients {found.tolist()}, "
            f"largest error {error:.2e}, identical on every rank: {identical}",
            flush=True,
        )
    return {"steps": step, "error": error, "identical": identical}


if __name__ == "__main__":
    arguments = parse_args()
    if "HOROVOD_SIZE" in os.environ:  # started by a launcher: this process is one rank
        main(arguments)
    else:
        from horovod.common.testing import run_cluster

        results = run_cluster(main, arguments.np, args=(arguments,))
        sys.exit(0 if all(r["identical"] for r in results) else 1)
