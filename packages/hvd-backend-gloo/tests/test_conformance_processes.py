"""The backend conformance suite on Gloo with 2, 3 and 4 ranks in separate processes (horovod.run).

The ranks share this host, so they talk through shared memory; the same suite runs again with it
turned off, over TCP (what ranks on different hosts use).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import horovod
from horovod.common.testing import cases
from horovod.common.testing.conformance import BackendConformance


class TestGlooConformanceProcesses(BackendConformance):
    backend = "gloo"
    world_sizes = (2, 3, 4)
    timeout = 180.0
    transport_env: ClassVar[dict[str, str]] = {}

    def run(self, case: Callable[..., Any], np: int, *args: Any, env: Mapping[str, str] | None = None) -> list:
        ranks_env = {"HOROVOD_CPU_OPERATIONS": "gloo", "OMP_NUM_THREADS": "1", **self.transport_env, **(env or {})}
        return horovod.run(case, args=args, np=np, env=ranks_env, start_timeout=int(self.timeout))

    def test_cached_ops_sent_ahead(self) -> None:
        # Over TCP each rank sends ahead the second and third calls of the broadcast it is the root
        # of and of the alltoall; through shared memory nothing goes ahead.
        over_tcp = self.transport_env.get("HOROVOD_GLOO_SHARED_MEMORY") == "0"
        for np in self.world_sizes:
            stats = self.run(cases.case_cached_ops_sent_ahead, np)
            assert [s["eager_sends"] for s in stats] == [4 if over_tcp else 0] * np, stats


class TestGlooConformanceProcessesOverTcp(TestGlooConformanceProcesses):
    transport_env: ClassVar[dict[str, str]] = {"HOROVOD_GLOO_SHARED_MEMORY": "0"}
