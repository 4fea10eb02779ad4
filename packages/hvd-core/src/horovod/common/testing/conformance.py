"""The backend conformance suite: every collective, dtype and op, checked on N ranks.

A backend package subclasses :class:`BackendConformance` in its tests, names its backend, and
says how to run N ranks (threads of one process by default; a multi-process backend overrides
``run`` to launch real processes)::

    class TestGlooConformance(BackendConformance):
        backend = "gloo"
        world_sizes = (2, 3, 4)

        def run(self, case, np, *args, env=None):
            return horovod.run(case, args=args, np=np, env=env)

Capability flags switch off what a backend legitimately lacks; everything else must pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from horovod.common.testing import adasum_cases, cases, device_cases
from horovod.common.testing.cluster import run_cluster


class BackendConformance:
    #: The backend's registered name.
    backend: ClassVar[str] = ""
    #: Numbers of ranks to test with; odd sizes catch ring bugs.
    world_sizes: ClassVar[tuple[int, ...]] = (2, 3, 4)
    #: Dtypes the backend reduces (float16/bfloat16 may be missing on some transports).
    reduce_dtypes: ClassVar[tuple[str, ...]] = cases.ALL_DTYPES
    #: Whether process sets (several communicators per rank) are supported.
    supports_process_sets: ClassVar[bool] = True
    #: Per-run limit in seconds; a hang fails the test instead of stalling CI.
    timeout: ClassVar[float] = 120.0

    def run(self, case: Callable[..., Any], np: int, *args: Any, env: Mapping[str, str] | None = None) -> list[Any]:
        """Runs ``case(*args)`` on ``np`` ranks and returns the per-rank results."""
        return run_cluster(case, np, args=args, env=env, backend=self.backend, timeout=self.timeout)

    def _each_size(self, case: Callable[..., Any], *args: Any, env: Mapping[str, str] | None = None) -> None:
        for np in self.world_sizes:
            self.run(case, np, *args, env=env)

    def test_allreduce(self) -> None:
        self._each_size(cases.case_allreduce, self.reduce_dtypes)

    def test_allgather(self) -> None:
        self._each_size(cases.case_allgather, cases.ALL_DTYPES)

    def test_broadcast(self) -> None:
        self._each_size(cases.case_broadcast, cases.ALL_DTYPES)

    def test_alltoall(self) -> None:
        self._each_size(cases.case_alltoall, cases.ALL_DTYPES)

    def test_cached_ops_sent_ahead(self) -> None:
        self._each_size(cases.case_cached_ops_sent_ahead)

    def test_reducescatter(self) -> None:
        self._each_size(cases.case_reducescatter, self.reduce_dtypes)

    def test_device_tensors_staged(self) -> None:
        """Device tensors (hvd-core's simulated device) staged through pinned memory and this backend."""
        env = {**device_cases.ENV, "HOROVOD_GPU_OPERATIONS": self.backend}
        self._each_size(device_cases.case_device_tensors, self.reduce_dtypes, cases.ALL_DTYPES, env=env)

    def test_adasum(self) -> None:
        self._each_size(adasum_cases.case_adasum, cases.FLOAT_DTYPES)

    def test_adasum_groups_and_scaling(self) -> None:
        self._each_size(adasum_cases.case_adasum_groups_and_scaling)

    def test_adasum_process_set(self) -> None:
        if self.supports_process_sets:
            self._each_size(adasum_cases.case_adasum_process_set)

    def test_adasum_refusals(self) -> None:
        self._each_size(adasum_cases.case_adasum_refusals)

    def test_barrier_and_async(self) -> None:
        self._each_size(cases.case_barrier_and_async)

    def test_grouped(self) -> None:
        self._each_size(cases.case_grouped)

    def test_join(self) -> None:
        for np in self.world_sizes:
            assert self.run(cases.case_join, np) == [np - 1] * np

    def test_join_contributions(self) -> None:
        self._each_size(cases.case_join_contributions)

    def test_static_process_sets(self) -> None:
        if self.supports_process_sets:
            self._each_size(cases.case_static_process_sets)

    def test_process_set_broadcast_roots_are_global_ranks(self) -> None:
        if self.supports_process_sets:
            self._each_size(cases.case_process_set_broadcast_roots)

    def test_dynamic_process_sets(self) -> None:
        if self.supports_process_sets:
            self._each_size(cases.case_dynamic_process_sets)

    def test_mismatches_raise_on_every_rank(self) -> None:
        self._each_size(cases.case_mismatches)

    def test_call_time_errors(self) -> None:
        self._each_size(cases.case_call_time_errors)

    def test_fusion_does_not_change_results(self) -> None:
        for np in self.world_sizes:
            fused = self.run(cases.case_fusion_results, np, 40)
            unfused = self.run(cases.case_fusion_results, np, 40, env={"HOROVOD_FUSION_THRESHOLD": "0"})
            assert fused == unfused
