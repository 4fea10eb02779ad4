"""The autotuner of a running job: on rank 0, a thread that turns the engine's step marks into
window scores for the search, and hands the search's settings to the engine, which carries them to
every rank in its negotiation (applied by all at the end of the same cycle).

A window is ``steps_per_sample`` training steps between two of the engine's step marks (the engine
timestamps the step where a tensor name repeats): its score is the bytes of every collective moved
in it per microsecond. The thread wakes every few milliseconds and holds the GIL only to read.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import IO, Any

from horovod.common.autotune.options import AutotuneOptions, MiB
from horovod.common.autotune.search import Search
from horovod.common.autotune.space import SearchSpace, Settings

POLL_S = 0.005


def started_settings(env: Mapping[str, str], options: AutotuneOptions, config: Any) -> Settings:
    """What the engine starts with: the configured values, or HOROVOD_AUTOTUNE_START's."""
    start = options.start_values()
    threshold = config.fusion_threshold
    if "fusion_threshold_mb" in start:
        threshold = int(start["fusion_threshold_mb"] * MiB)
    return Settings(
        fusion_threshold=threshold,
        cycle_time_ms=start.get("cycle_time_ms", config.cycle_time_ms),
        hierarchical_allreduce=config.hierarchical_allreduce,
        hierarchical_allgather=config.hierarchical_allgather,
    )


class Autotuner:
    """Samples the engine and drives the search until ``stop()``."""

    def __init__(self, engine: Any, search: Search, log_file: IO[str] | None) -> None:
        self.engine = engine
        self.search = search
        self._log_file = log_file
        self._epoch = 0  # of the settings the search proposed last (0: those the engine started with)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hvd-autotune", daemon=True)

    @classmethod
    def create(
        cls, engine: Any, env: Mapping[str, str], options: AutotuneOptions, start: Settings, spans_hosts: bool
    ) -> Autotuner:
        space = SearchSpace.from_env(env, spans_hosts, start)
        log_file = open(options.log_path, "w", newline="") if options.log_path else None  # noqa: SIM115 (closed by stop)
        tuner = cls(engine, None, log_file)  # type: ignore[arg-type]
        tuner.search = Search(space, options, tuner._propose, start, log_file)
        return tuner

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ends sampling; a search not finished yet writes its best row."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        self.search.write_best()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def _propose(self, settings: Settings) -> None:
        self._epoch = self.engine.propose_settings(
            settings.fusion_threshold,
            max(1, round(settings.cycle_time_ms * 1000)),
            settings.hierarchical_allreduce,
            settings.hierarchical_allgather,
        )

    def _run(self) -> None:
        window: tuple[int, int, int] | None = None  # (steps, bytes, time) where it began
        while not self._stop.wait(POLL_S):
            if self.engine.current_settings()["epoch"] != self._epoch:
                window = None  # not applied yet: what is measured is still the old settings'
                continue
            mark = self.engine.last_step()
            if window is None or mark[0] < window[0]:
                window = mark
                continue
            steps, moved, when = mark
            if steps - window[0] < self.search.options.steps_per_sample or when <= window[2]:
                continue
            score = (moved - window[1]) / (when - window[2])  # bytes per microsecond
            window = mark
            self.search.window(score)
