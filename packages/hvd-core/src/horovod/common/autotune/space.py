"""What the autotuner searches: the engine's tunables, their bounds, and the unit-cube points the
Gaussian process works in. A tunable the user set (``HOROVOD_FUSION_THRESHOLD=...``) is fixed at
that value and not searched; the hierarchical switches are searched only where the job spans hosts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

MiB = 1024 * 1024


@dataclass(frozen=True)
class Settings:
    """One setting of the engine's tunables, as the engine takes them."""

    fusion_threshold: int  # bytes
    cycle_time_ms: float
    hierarchical_allreduce: bool = False
    hierarchical_allgather: bool = False

    def row(self) -> list[str]:
        """The log's columns (Horovod's order): hierarchical_allreduce, hierarchical_allgather,
        cycle_time_ms, tensor_fusion_threshold (MiB)."""
        return [
            str(int(self.hierarchical_allreduce)),
            str(int(self.hierarchical_allgather)),
            f"{self.cycle_time_ms:.4g}",
            f"{self.fusion_threshold / MiB:.4g}",
        ]


@dataclass(frozen=True)
class Dimension:
    """One searched tunable: its name and how a coordinate in [0, 1] maps to its value."""

    name: str
    low: float
    high: float
    log: bool = False  # geometric between low and high (the threshold: from 1 MiB - 1 up)
    switch: bool = False

    def value(self, x: float) -> float:
        if self.switch:
            return float(x >= 0.5)
        if self.log:
            return math.exp(math.log(self.low) + x * (math.log(self.high) - math.log(self.low)))
        return self.low + x * (self.high - self.low)

    def coordinate(self, value: float) -> float:
        if self.switch:
            return float(bool(value))
        if self.log:
            return (math.log(max(value, self.low)) - math.log(self.low)) / (math.log(self.high) - math.log(self.low))
        return (value - self.low) / (self.high - self.low)


# The threshold is searched as threshold + 1 MiB, geometrically from 1 MiB (0: no fusion) to
# 513 MiB, Horovod's default of 128 MiB inside; the cycle time geometrically from 0.1 to 100 ms.
FUSION = Dimension("fusion_threshold", 1.0, 513.0, log=True)
CYCLE = Dimension("cycle_time_ms", 0.1, 100.0, log=True)
HIER_ALLREDUCE = Dimension("hierarchical_allreduce", 0, 1, switch=True)
HIER_ALLGATHER = Dimension("hierarchical_allgather", 0, 1, switch=True)


@dataclass
class SearchSpace:
    """The searched dimensions, and the fixed values of the rest."""

    fixed: Settings  # the value of every tunable that is not searched
    dimensions: list[Dimension] = field(default_factory=list)

    @classmethod
    def from_env(cls, env: Mapping[str, str], spans_hosts: bool, started: Settings) -> SearchSpace:
        """Every tunable the user did not set (``started``: what the engine runs with now)."""
        dims = []
        if not env.get("HOROVOD_FUSION_THRESHOLD", "").strip():
            dims.append(FUSION)
        if not env.get("HOROVOD_CYCLE_TIME", "").strip():
            dims.append(CYCLE)
        if spans_hosts and not env.get("HOROVOD_HIERARCHICAL_ALLREDUCE", "").strip():
            dims.append(HIER_ALLREDUCE)
        if spans_hosts and not env.get("HOROVOD_HIERARCHICAL_ALLGATHER", "").strip():
            dims.append(HIER_ALLGATHER)
        return cls(started, dims)

    @property
    def switches(self) -> list[int]:
        return [i for i, d in enumerate(self.dimensions) if d.switch]

    def settings(self, point: np.ndarray) -> Settings:
        """The settings at a point of the unit cube."""
        values = {d.name: d.value(float(x)) for d, x in zip(self.dimensions, point, strict=True)}
        threshold = self.fixed.fusion_threshold
        if "fusion_threshold" in values:
            mib = values["fusion_threshold"] - 1.0
            threshold = 0 if mib < 0.5 else round(mib * MiB)
        return Settings(
            fusion_threshold=threshold,
            cycle_time_ms=values.get("cycle_time_ms", self.fixed.cycle_time_ms),
            hierarchical_allreduce=bool(values.get("hierarchical_allreduce", self.fixed.hierarchical_allreduce)),
            hierarchical_allgather=bool(values.get("hierarchical_allgather", self.fixed.hierarchical_allgather)),
        )

    def point(self, settings: Settings) -> np.ndarray:
        """The point of the unit cube nearest to ``settings``."""
        raw = {
            "fusion_threshold": settings.fusion_threshold / MiB + 1.0,
            "cycle_time_ms": settings.cycle_time_ms,
            "hierarchical_allreduce": settings.hierarchical_allreduce,
            "hierarchical_allgather": settings.hierarchical_allgather,
        }
        return np.array([min(max(d.coordinate(raw[d.name]), 0.0), 1.0) for d in self.dimensions])
