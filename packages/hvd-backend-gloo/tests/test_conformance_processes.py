"""The backend conformance suite on Gloo with 2, 3 and 4 ranks in separate processes (horovod.run)."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import horovod
from horovod.common.testing.conformance import BackendConformance


class TestGlooConformanceProcesses(BackendConformance):
    backend = "gloo"
    world_sizes = (2, 3, 4)
    timeout = 180.0

    def run(self, case: Callable[..., Any], np: int, *args: Any, env: Mapping[str, str] | None = None) -> list:
        ranks_env = {"HOROVOD_CPU_OPERATIONS": "gloo", "OMP_NUM_THREADS": "1", **(env or {})}
        return horovod.run(case, args=args, np=np, env=ranks_env, start_timeout=int(self.timeout))
