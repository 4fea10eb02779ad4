"""The horovod.torch module as Horovod users meet it: names, lazy import, plugin, job questions."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

import horovod.torch as hvd
from hvdtorch_testutil import cluster

HOROVOD_TORCH_API = [
    "init",
    "shutdown",
    "is_initialized",
    "size",
    "rank",
    "local_size",
    "local_rank",
    "cross_size",
    "cross_rank",
    "is_homogeneous",
    "mpi_threads_supported",
    "mpi_built",
    "mpi_enabled",
    "gloo_built",
    "gloo_enabled",
    "nccl_built",
    "cuda_built",
    "rocm_built",
    "ddl_built",
    "ccl_built",
    "start_timeline",
    "stop_timeline",
    "Average",
    "Sum",
    "Adasum",
    "Min",
    "Max",
    "Product",
    "ProcessSet",
    "global_process_set",
    "add_process_set",
    "remove_process_set",
    "HorovodInternalError",
    "allreduce",
    "allreduce_",
    "allreduce_async",
    "allreduce_async_",
    "grouped_allreduce",
    "grouped_allreduce_",
    "grouped_allreduce_async",
    "grouped_allreduce_async_",
    "sparse_allreduce_async",
    "allgather",
    "allgather_async",
    "grouped_allgather",
    "grouped_allgather_async",
    "broadcast",
    "broadcast_",
    "broadcast_async",
    "broadcast_async_",
    "alltoall",
    "alltoall_async",
    "reducescatter",
    "reducescatter_async",
    "grouped_reducescatter",
    "grouped_reducescatter_async",
    "poll",
    "synchronize",
    "join",
    "barrier",
    "Compression",
    "DistributedOptimizer",
    "broadcast_parameters",
    "broadcast_optimizer_state",
    "broadcast_object",
    "allgather_object",
    "SyncBatchNorm",
]


def test_every_horovod_name_is_there() -> None:
    missing = [name for name in HOROVOD_TORCH_API if not hasattr(hvd, name)]
    assert not missing, missing
    assert set(HOROVOD_TORCH_API) <= set(hvd.__all__) and set(HOROVOD_TORCH_API) <= set(dir(hvd))
    assert (hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max, hvd.Product) == (0, 1, 2, 3, 4, 5)
    assert issubclass(hvd.HorovodInternalError, RuntimeError)
    assert hvd.Compression.none is not hvd.Compression.fp16
    from horovod.torch.mpi_ops import allreduce_async_, synchronize  # Horovod scripts import these too

    assert allreduce_async_ is hvd.allreduce_async_ and synchronize is hvd.synchronize
    with pytest.raises(AttributeError):
        _ = hvd.no_such_function


def test_star_import() -> None:
    namespace: dict = {}
    exec("from horovod.torch import *", namespace)
    assert "DistributedOptimizer" in namespace and "allreduce" in namespace


def _run(code: str) -> None:
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_hooks_and_package_import_no_torch() -> None:
    _run(
        "import sys, horovod.torch, horovod.torch.hooks\n"
        "assert 'torch' not in sys.modules, 'importing horovod.torch.hooks imported torch'\n"
        "from horovod.common.plugin_api import get_plugin_manager\n"
        "spec = get_plugin_manager().frameworks()['torch']\n"
        "assert spec.module == 'horovod.torch' and spec.version == horovod.torch.__version__, spec\n"
        "assert 'torch' not in sys.modules, 'loading plugins imported torch'\n"
    )


def test_lone_process_without_launcher() -> None:
    _run(
        "import torch, horovod.torch as hvd\n"
        "hvd.init(); assert (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size()) == (0, 1, 0, 1)\n"
        "assert hvd.allreduce(torch.arange(3.0)).tolist() == [0.0, 1.0, 2.0]\n"
        "assert hvd.allgather(torch.ones(2, 1)).shape == (2, 1)\n"
        "m = torch.nn.Linear(2, 1); opt = hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1))\n"
        "m(torch.ones(3, 2)).sum().backward(); opt.step()\n"
        "hvd.shutdown(); assert not hvd.is_initialized()\n"
        "hvd.init(); assert hvd.is_initialized(); hvd.shutdown()\n"
    )


def case_job(timeline: str) -> dict:
    hvd.init()
    hvd.start_timeline(timeline)
    hvd.allreduce(torch.ones(2), name="timeline.tensor")
    hvd.stop_timeline()
    return {
        "rank": hvd.rank(),
        "size": hvd.size(),
        "local_rank": hvd.local_rank(),
        "local_size": hvd.local_size(),
        "cross_rank": hvd.cross_rank(),
        "cross_size": hvd.cross_size(),
        "homogeneous": hvd.is_homogeneous(),
        "initialized": hvd.is_initialized(),
        "mpi_threads": hvd.mpi_threads_supported(),
        "enabled": (hvd.mpi_enabled(), hvd.gloo_enabled()),
        "built": [
            f()
            for f in (
                hvd.mpi_built,
                hvd.gloo_built,
                hvd.nccl_built,
                hvd.cuda_built,
                hvd.rocm_built,
                hvd.ddl_built,
                hvd.ccl_built,
            )
        ],
    }


def test_job_questions_and_timeline(tmp_path) -> None:
    timeline = tmp_path / "timeline.json"
    results = cluster(case_job, 3, str(timeline))
    for rank, info in enumerate(results):
        assert (info["rank"], info["size"], info["local_rank"], info["local_size"]) == (rank, 3, rank, 3)
        assert (info["cross_rank"], info["cross_size"], info["homogeneous"], info["initialized"]) == (0, 1, True, True)
        assert info["mpi_threads"] is False and info["enabled"] == (False, False)
        assert all(isinstance(b, bool) for b in info["built"])
    events = json.loads(timeline.read_text())
    assert any("timeline.tensor" in json.dumps(e) for e in events)
