"""The example backend, installed as a wheel, through the real engine and plugin manager.

Needs hvd-core (with its bfloat16 extra) and this package installed, e.g.
``pip install --find-links <wheelhouse> "hvd-core[bfloat16]" examples/hvd-backend-example pytest``.
"""

import ctypes
import os

import numpy as np

import horovod.common as hvd
from horovod.common.plugin_api import get_plugin_manager
from horovod.common.testing.cluster import run_cluster
from horovod.common.testing.conformance import BackendConformance
from horovod.common.testing.probes import engine_stats, load_backend


def test_entry_point_registers_the_backend():
    spec = get_plugin_manager().backend("example")
    assert spec.device_kinds == ("cpu",) and spec.priority == -10 and not spec.in_process_only
    path = spec.library_path()
    assert os.path.isabs(path) and os.path.isfile(path)
    lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_LOCAL", 0))
    assert lib.hvd_backend_v1_get and lib.hvd_backend_ext_v1_get  # the ABI and its extension
    assert load_backend(path).extensions == ["allreduce_buffers"]


def _burst(op: int) -> tuple[list, dict]:
    """Twenty allreduces submitted at once (the engine fuses them), their results, and the engine's
    counters of the calls it made for them."""
    hvd.init()
    before = engine_stats()
    handles = [
        hvd.allreduce_async(np.arange(i + 1, dtype=np.float32) * (hvd.rank() + 1), name=f"burst.{i}", op=op)
        for i in range(20)
    ]
    results = [hvd.synchronize(h).tolist() for h in handles]
    after = engine_stats()
    counters = {k: after[k] - before[k] for k in ("fused_batches", "declined_buffer_calls")}
    counters["allreduce"] = after["backend_calls"]["allreduce"] - before["backend_calls"]["allreduce"]
    return results, counters


def test_the_engine_uses_the_extension_and_takes_back_what_it_declines():
    """Sums go through allreduce_buffers; averages, which need a postscale, are declined on every
    rank and reduced by the engine through its fusion buffer; both give the right results."""
    for op, factor in ((hvd.Sum, 3.0), (hvd.Average, 1.5)):  # ranks contribute x1 and x2
        ranks = run_cluster(_burst, 2, args=(op,), backend="example", timeout=120)
        for results, counters in ranks:
            assert results == [(np.arange(i + 1) * factor).tolist() for i in range(20)]
            assert counters["fused_batches"] >= 1  # the burst went in batches of several tensors
            # Every call of an average is declined (its postscale is 1/2), none of a sum.
            assert counters["declined_buffer_calls"] == (counters["allreduce"] if op == hvd.Average else 0)


class TestExampleConformance(BackendConformance):
    """Every collective, dtype and op with 1 to 4 ranks (threads sharing the in-memory store)."""

    backend = "example"
    world_sizes = (1, 2, 3, 4)
