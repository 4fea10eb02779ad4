"""Allreduce of float16 and bfloat16 against float32 of the same element count: 16-bit data is half
the bytes, and should take well under float32's time once the data is large.

Run under the launcher, e.g. ``horovodrun -np 2 python benchmarks/low_precision.py --out r.json``
(``HOROVOD_GLOO_SHARED_MEMORY=0`` for TCP; ``HOROVOD_REDUCE_SIMD=portable`` for the reductions'
portable code). Every rank also runs torch.distributed's gloo on the same tensors, alternately, so
both see the same machine state. Rank 0 writes the results as JSON.
"""

from __future__ import annotations

import argparse
import json
import os

import torch
import torch.distributed as dist

import horovod.torch as hvd
from collectives import init_torch_gloo, inner_calls
from stats import load_average, measure_alternating

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
KiB, MiB = 1024, 1024 * 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--max-bytes", type=int, default=64 * MiB, help="the largest float32 allreduce")
    args = parser.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    init_torch_gloo(hvd.rank(), hvd.size())
    sizes = [4 * KiB * 4**k for k in range(10) if 4 * KiB * 4**k <= args.max_bytes]
    results = []
    for size in sizes:
        elements = size // 4
        for name, dtype in DTYPES.items():
            ours, theirs = torch.ones(elements, dtype=dtype), torch.ones(elements, dtype=dtype)
            timed = measure_alternating(
                {
                    "hvd": lambda t=ours, tag=f"lp.{name}.{elements}": hvd.allreduce_(t, op=hvd.Sum, name=tag),
                    "torch": lambda t=theirs: dist.all_reduce(t),
                },
                inner={"hvd": inner_calls(size), "torch": inner_calls(size)},
                repeats=args.repeats,
                before_each=hvd.barrier,
            )
            results.append({"dtype": name, "elements": elements, **timed, "load": load_average()})
    if hvd.rank() == 0:
        setting = {k: os.environ.get(k, "") for k in ("HOROVOD_GLOO_SHARED_MEMORY", "HOROVOD_REDUCE_SIMD")}
        with open(args.out, "w") as f:
            json.dump({"ranks": hvd.size(), "env": setting, "results": results}, f)
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
