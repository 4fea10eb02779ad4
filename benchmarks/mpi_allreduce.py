"""The allreduce sweep with hvd on MPI (hvd-backend-mpi), beside torch.distributed (gloo) and, where
installed, mpi4py's Allreduce: all three in the same processes, measured alternately.

hvd on MPI needs its ranks started by mpirun, so run_all.py launches this script separately:
``horovodrun --mpi -np 2 python benchmarks/mpi_allreduce.py --out r.json``. Its figures are
compared with hvd on Gloo (collectives.py, another launch) through the baseline both launches
measure, torch.distributed on gloo: hvd-on-MPI/torch here against hvd-on-Gloo/torch there.
"""

from __future__ import annotations

import json

import torch
import torch.distributed as dist

import horovod.torch as hvd
from collectives import allreduce_sizes, busbw_factor, hvd_op, init_torch_gloo, inner_calls, parse_sweep_args, torch_op
from stats import load_average, measure


def mpi4py_allreduce(comm, tensor: torch.Tensor):
    """mpi4py's in-place Allreduce (sum) on the tensor's memory: MPI itself, no hvd in between."""
    from mpi4py import MPI

    buffer = tensor.numpy()
    return lambda: comm.Allreduce(MPI.IN_PLACE, buffer, op=MPI.SUM)


def main() -> None:
    args = parse_sweep_args()
    torch.set_num_threads(1)
    hvd.init()
    if not hvd.mpi_enabled():
        raise SystemExit("mpi_allreduce.py: hvd is not on MPI: launch it with horovodrun --mpi (or mpirun)")
    n, rank = hvd.size(), hvd.rank()
    init_torch_gloo(rank, n)
    try:
        from mpi4py import MPI  # after hvd.init(): mpi4py finds MPI initialised and uses it as it is

        comm = MPI.COMM_WORLD
    except ImportError:
        comm = None
    results = []
    for size in allreduce_sizes(args.max_bytes):
        elements = max(1, size // 4)
        inner = inner_calls(size)
        row = {
            "bench": "allreduce",
            "bytes": elements * 4,
            "hvd_mpi": measure(
                hvd_op("allreduce", torch.ones(elements), f"bench.mpi.{size}"), repeats=args.repeats, inner=inner
            ),
            "torch": measure(torch_op("allreduce", torch.ones(elements), n), repeats=args.repeats, inner=inner),
            "busbw_factor": busbw_factor("allreduce", n),
        }
        if comm is not None:
            row["mpi4py"] = measure(mpi4py_allreduce(comm, torch.ones(elements)), repeats=args.repeats, inner=inner)
        row["load"] = load_average()
        results.append(row)
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump({"ranks": n, "mpi4py": comm is not None, "results": results}, f)
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
