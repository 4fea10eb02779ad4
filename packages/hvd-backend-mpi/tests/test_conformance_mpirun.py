"""The backend conformance suite on MPI with 2, 3 and 4 ranks, started by this MPI's own mpiexec.

The ranks are launched without horovodrun: every case's hvd.init() finds rank and size through the
plugin's hvd_external_launch (MPI itself), as `mpirun -np N python train.py` does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import _mpirun
from horovod.common.testing.conformance import BackendConformance


class TestMpiConformance(BackendConformance):
    backend = "mpi"
    world_sizes = (2, 3, 4)
    timeout = 120.0

    def run(self, case: Callable[..., Any], np: int, *args: Any, env: Mapping[str, str] | None = None) -> list:
        return _mpirun.run_pooled(case, np, *args, env=env, timeout=self.timeout)
