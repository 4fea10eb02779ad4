"""The example backend, installed as a wheel, through the real engine and plugin manager.

Needs hvd-core (with its bfloat16 extra) and this package installed, e.g.
``pip install --find-links <wheelhouse> "hvd-core[bfloat16]" examples/hvd-backend-example pytest``.
"""

import ctypes
import os

from horovod.common.plugins import get_plugin_manager
from horovod.common.testing.conformance import BackendConformance


def test_entry_point_registers_the_backend():
    spec = get_plugin_manager().backend("example")
    assert spec.device_kinds == ("cpu",) and spec.priority == -10 and not spec.in_process_only
    path = spec.library_path()
    assert os.path.isabs(path) and os.path.isfile(path)
    lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_LOCAL", 0))
    assert lib.hvd_backend_v1_get  # the one exported entry point


class TestExampleConformance(BackendConformance):
    """Every collective, dtype and op with 1 to 4 ranks (threads sharing the in-memory store)."""

    backend = "example"
    world_sizes = (1, 2, 3, 4)
