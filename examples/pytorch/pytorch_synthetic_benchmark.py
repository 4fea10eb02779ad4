"""Horovod's PyTorch synthetic benchmark: training throughput on random data (images/sec).

Same structure and arguments as Horovod's examples/pytorch/pytorch_synthetic_benchmark.py; the
models are defined here (torchvision is not needed): a small CNN (``cnn``) and an MLP (``mlp``).

    horovodrun -np 2 python examples/pytorch/pytorch_synthetic_benchmark.py --model cnn

Started directly (no launcher, HOROVOD_SIZE unset), it runs --np ranks (default 2) as threads of
this process, connected in memory by hvd-core's test kit.
"""

from __future__ import annotations

import argparse
import itertools
import os
import timeit

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import horovod.torch as hvd


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="PyTorch Synthetic Benchmark", formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--fp16-allreduce", action="store_true", default=False, help="use fp16 compression during allreduce"
    )
    parser.add_argument("--model", type=str, default="cnn", choices=sorted(MODELS), help="model to benchmark")
    parser.add_argument("--batch-size", type=int, default=32, help="input batch size")
    parser.add_argument("--image-size", type=int, default=64, help="height and width of the synthetic images")
    parser.add_argument("--num-classes", type=int, default=1000, help="number of classes")
    parser.add_argument(
        "--num-warmup-batches",
        type=int,
        default=10,
        help="number of warm-up batches that don't count towards benchmark",
    )
    parser.add_argument(
        "--num-batches-per-iter", type=int, default=10, help="number of batches per benchmark iteration"
    )
    parser.add_argument("--num-iters", type=int, default=10, help="number of benchmark iterations")
    parser.add_argument("--no-cuda", action="store_true", default=False, help="disables CUDA training")
    parser.add_argument("--use-adasum", action="store_true", default=False, help="use adasum algorithm to do reduction")
    parser.add_argument("--np", type=int, default=2, help="ranks to run as threads when not started by a launcher")
    args = parser.parse_args(argv)
    args.cuda = not args.no_cuda and torch.cuda.is_available()
    return args


class SmallCNN(nn.Module):
    """Four conv blocks and a linear classifier: a ResNet-shaped workload small enough for CPUs."""

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        widths = [3, 32, 64, 128, 256]
        self.features = nn.Sequential(
            *[
                nn.Sequential(
                    nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                    nn.BatchNorm2d(cout),
                    nn.ReLU(inplace=True),
                    nn.MaxPool2d(2),
                )
                for cin, cout in itertools.pairwise(widths)
            ]
        )
        self.classifier = nn.Linear(widths[-1], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class MLP(nn.Module):
    def __init__(self, num_classes: int, image_size: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Flatten(),
            nn.Linear(3 * image_size * image_size, 1024),
            nn.ReLU(inplace=True),
            nn.Linear(1024, 1024),
            nn.ReLU(inplace=True),
            nn.Linear(1024, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


MODELS = {
    "cnn": lambda args: SmallCNN(args.num_classes),
    "mlp": lambda args: MLP(args.num_classes, args.image_size),
}


def main(args: argparse.Namespace) -> dict:
    hvd.init()
    torch.set_num_threads(1)

    if args.cuda:
        # Horovod: pin GPU to local rank.
        torch.cuda.set_device(hvd.local_rank())
        torch.backends.cudnn.benchmark = True

    model = MODELS[args.model](args)
    if args.cuda:
        model.cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    # Horovod: (optional) compression algorithm.
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    # Horovod: wrap optimizer with DistributedOptimizer.
    optimizer = hvd.DistributedOptimizer(
        optimizer,
        named_parameters=model.named_parameters(),
        compression=compression,
        op=hvd.Adasum if args.use_adasum else hvd.Average,
    )
    # Horovod: broadcast parameters & optimizer state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    # Set up fixed fake data.
    data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    target = torch.randint(0, args.num_classes, (args.batch_size,))
    if args.cuda:
        data, target = data.cuda(), target.cuda()

    def benchmark_step() -> None:
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()

    def log(s: str) -> None:
        if hvd.rank() == 0:
            print(s, flush=True)

    log(f"Model: {args.model}")
    log(f"Batch size: {args.batch_size}")
    device = "GPU" if args.cuda else "CPU"
    log(f"Number of {device}s: {hvd.size()}")

    # Warm-up
    log("Running warmup...")
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)

    # Benchmark
    log("Running benchmark...")
    img_secs = []
    for x in range(args.num_iters):
        time = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        img_sec = args.batch_size * args.num_batches_per_iter / time
        log(f"Iter #{x}: {img_sec:.1f} img/sec per {device}")
        img_secs.append(img_sec)

    # Results
    img_sec_mean = float(np.mean(img_secs))
    img_sec_conf = float(1.96 * np.std(img_secs))
    log(f"Img/sec per {device}: {img_sec_mean:.1f} +-{img_sec_conf:.1f}")
    log(f"Total img/sec on {hvd.size()} {device}(s): {hvd.size() * img_sec_mean:.1f} +-{hvd.size() * img_sec_conf:.1f}")
    hvd.shutdown()
    return {"img_sec_per_worker": img_sec_mean}


if __name__ == "__main__":
    arguments = parse_args()
    if "HOROVOD_SIZE" in os.environ:  # started by a launcher: this process is one rank
        main(arguments)
    else:
        from horovod.common.testing import run_cluster

        run_cluster(main, arguments.np, args=(arguments,), timeout=3600)
