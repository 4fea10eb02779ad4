"""One rank of the job the install-from-dist test launches (``horovodrun -np 2 python dist_job.py``)
in an environment installed from ``dist/`` only: a few steps of data-parallel training with
horovod.torch, then one JSON line saying what this rank saw and which native libraries it loaded.

``HVD_HIDDEN_LIBRARY``, when set, is a library file the test hid (a system libgloo): the rank tries
to load it and reports whether it could."""

from __future__ import annotations

import ctypes
import json
import os

import torch

import horovod.torch as hvd


def mapped_files(fragment: str) -> list[str]:
    """The files of this process's memory maps whose name holds ``fragment``: the copies of a
    library the dynamic linker actually loaded."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "/" in line and fragment in line.rsplit("/", 1)[-1]}
    return sorted(paths)


def hidden_library_loads() -> bool | None:
    path = os.environ.get("HVD_HIDDEN_LIBRARY")
    if not path:
        return None
    try:
        ctypes.CDLL(path)
    except OSError:
        return False
    return True


def main() -> None:
    torch.set_num_threads(1)
    hvd.init()
    torch.manual_seed(1234 + hvd.rank())  # different initial weights: the broadcast must align them
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters()
    )
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    data = torch.randn(64, 16, generator=torch.Generator().manual_seed(hvd.rank()))
    target = (data.sum(dim=1) > 0).long()
    for _ in range(5):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(data), target).backward()
        optimizer.step()
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    every_rank = hvd.allgather(weights.unsqueeze(0))
    total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum)
    report = {
        "rank": hvd.rank(),
        "size": hvd.size(),
        "gloo_enabled": hvd.gloo_enabled(),
        "mpi_enabled": hvd.mpi_enabled(),
        "rank_sum": total.item(),
        "weights_identical": all(torch.equal(every_rank[0], row) for row in every_rank),
        "libgloo": mapped_files("libgloo"),
        "libmpi": mapped_files("libmpi"),
        "hidden_library_loads": hidden_library_loads(),
    }
    hvd.shutdown()
    print("DIST_JOB " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
