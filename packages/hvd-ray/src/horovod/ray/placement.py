"""Where the workers go: a placement group reserving their resources, and ranks given by node.

``num_workers`` packs the workers into as few nodes as fit (strategy ``PACK``, one bundle per
worker); ``num_hosts`` x ``num_workers_per_host`` puts each host's workers in one bundle, the
bundles on different nodes (``STRICT_SPREAD``). Ranks are then given node by node
(``horovod.runner.hosts.ranks_by_host``).
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class Layout:
    """How many workers, and how they are grouped in the placement group's bundles."""

    num_workers: int
    workers_per_bundle: int
    cpus_per_worker: float
    gpus_per_worker: float
    strategy: str

    @property
    def bundles(self) -> list[dict[str, float]]:
        bundle = {"CPU": self.cpus_per_worker * self.workers_per_bundle}
        if self.gpus_per_worker:
            bundle["GPU"] = self.gpus_per_worker * self.workers_per_bundle
        return [dict(bundle) for _ in range(self.num_workers // self.workers_per_bundle)]


def layout(
    num_workers: int | None,
    num_hosts: int | None,
    num_workers_per_host: int,
    cpus_per_worker: float,
    gpus_per_worker: float,
) -> Layout:
    if (num_workers is None) == (num_hosts is None):
        raise ValueError("give either num_workers, or num_hosts (with num_workers_per_host)")
    if num_workers is not None:
        if num_workers < 1:
            raise ValueError(f"num_workers={num_workers} must be at least 1")
        return Layout(num_workers, 1, cpus_per_worker, gpus_per_worker, "PACK")
    assert num_hosts is not None
    if num_hosts < 1 or num_workers_per_host < 1:
        raise ValueError(f"num_hosts={num_hosts} and num_workers_per_host={num_workers_per_host} must be at least 1")
    return Layout(
        num_hosts * num_workers_per_host, num_workers_per_host, cpus_per_worker, gpus_per_worker, "STRICT_SPREAD"
    )


def reserve(plan: Layout, timeout_s: float) -> Any:
    """A ready placement group for ``plan``; TimeoutError, naming what was asked, when Ray cannot place it."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    group = placement_group(plan.bundles, strategy=plan.strategy)
    ready, _ = ray.wait([group.ready()], timeout=timeout_s)
    if not ready:
        remove_placement_group(group)
        raise TimeoutError(
            f"Ray could not place {plan.num_workers} worker(s) ({len(plan.bundles)} bundle(s) of {plan.bundles[0]}, "
            f"strategy {plan.strategy}) within {timeout_s:g} s (placement_group_timeout_s); the cluster has "
            f"{ray.cluster_resources()}, of which {ray.available_resources()} are free"
        )
    return group
