"""The autotuner's knobs, read from the environment (horovodrun's ``--autotune*`` flags set them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

MiB = 1024 * 1024


@dataclass(frozen=True)
class AutotuneOptions:
    """Horovod's ``HOROVOD_AUTOTUNE*`` knobs and hvd's own, with Horovod's defaults.

    A *window* is ``steps_per_sample`` training steps; a *sample* scores one setting by the median
    of ``windows_per_sample`` windows (the first window after a change is discarded: caches and
    buffers settle). The first ``warmup_samples`` samples are discarded, then a few settings
    spread over the space are scored, then ``bayes_opt_max_samples`` chosen by Bayesian
    optimisation; the best is kept.
    """

    enabled: bool = False
    log_path: str = ""
    warmup_samples: int = 3
    steps_per_sample: int = 10
    bayes_opt_max_samples: int = 20
    gaussian_process_noise: float = 0.8
    windows_per_sample: int = 5  # hvd's own: HOROVOD_AUTOTUNE_WINDOWS_PER_SAMPLE
    continuous: bool = False  # hvd's own: HOROVOD_AUTOTUNE_CONTINUOUS, search again when throughput drifts
    drift: float = 0.25  # ... by this share below the best score, for two samples in a row
    seed: int = 0  # hvd's own: HOROVOD_AUTOTUNE_SEED
    start: str = ""  # hvd's own: HOROVOD_AUTOTUNE_START, e.g. "fusion_threshold_mb=0,cycle_time_ms=50"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AutotuneOptions:
        def number(key: str, default: float, kind: type = int, minimum: float = 0) -> float:
            raw = env.get(key, "").strip()
            if not raw:
                return default
            try:
                value: float = kind(raw)
            except ValueError:
                raise ValueError(f"{key}={raw!r} is not a{'n integer' if kind is int else ' number'}") from None
            if value < minimum:
                raise ValueError(f"{key}={raw} must be at least {minimum}")
            return value

        def flag(key: str) -> bool:
            return env.get(key, "").strip().lower() not in ("", "0", "false", "no", "off")

        return cls(
            enabled=flag("HOROVOD_AUTOTUNE"),
            log_path=env.get("HOROVOD_AUTOTUNE_LOG", "").strip(),
            warmup_samples=int(number("HOROVOD_AUTOTUNE_WARMUP_SAMPLES", 3)),
            steps_per_sample=int(number("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", 10, minimum=1)),
            bayes_opt_max_samples=int(number("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", 20)),
            gaussian_process_noise=float(number("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", 0.8, float)),
            windows_per_sample=int(number("HOROVOD_AUTOTUNE_WINDOWS_PER_SAMPLE", 5, minimum=1)),
            continuous=flag("HOROVOD_AUTOTUNE_CONTINUOUS"),
            seed=int(number("HOROVOD_AUTOTUNE_SEED", 0)),
            start=env.get("HOROVOD_AUTOTUNE_START", "").strip(),
        )

    def start_values(self) -> dict[str, float]:
        """HOROVOD_AUTOTUNE_START's settings: ``fusion_threshold_mb`` and ``cycle_time_ms``."""
        values: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in self.start.split(","))):
            name, _, raw = part.partition("=")
            if name.strip() not in ("fusion_threshold_mb", "cycle_time_ms"):
                raise ValueError(
                    f"HOROVOD_AUTOTUNE_START={self.start!r}: {name.strip()!r} is not one of fusion_threshold_mb, "
                    "cycle_time_ms"
                )
            try:
                values[name.strip()] = float(raw)
            except ValueError:
                raise ValueError(f"HOROVOD_AUTOTUNE_START={self.start!r}: {raw!r} is not a number") from None
        return values
