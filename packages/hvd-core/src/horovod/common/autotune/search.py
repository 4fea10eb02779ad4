"""The search: which setting to try next, from the scores of the ones tried (engine-free, so that
tests can feed it the scores of a workload whose best settings they know).

It is fed one window's score at a time (:meth:`Search.window`), proposes each new setting through
``propose`` (which makes every rank apply it), and writes a row per sample to the log.
"""

from __future__ import annotations

import csv
import logging
import statistics
import threading
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from horovod.common.autotune.gaussian_process import suggest
from horovod.common.autotune.options import AutotuneOptions
from horovod.common.autotune.space import SearchSpace, Settings

_log = logging.getLogger("horovod")

#: The log's columns: Horovod's (tensor_fusion_threshold in MiB; score in bytes per microsecond).
COLUMNS = ["hierarchical_allreduce", "hierarchical_allgather", "cycle_time_ms", "tensor_fusion_threshold", "score"]
#: Settings spread over the space, scored after the first (the point the job started at) before the
#: Gaussian process takes over: the unit cube's centre and four points around it.
DESIGN = [0.5, 0.2, 0.8, 0.35, 0.65]


class Search:
    """One job's search, on rank 0. Thread-safe: the sampler thread feeds it, callers read it."""

    def __init__(
        self,
        space: SearchSpace,
        options: AutotuneOptions,
        propose: Callable[[Settings], None],
        start: Settings,
        log_file: IO[str] | None = None,
    ) -> None:
        self.space = space
        self.options = options
        self._propose = propose
        self._rng = np.random.default_rng(options.seed)
        self._lock = threading.Lock()
        self._writer = csv.writer(log_file) if log_file is not None else None
        self._log_file = log_file
        if self._writer is not None:
            self._writer.writerow(COLUMNS)
            log_file.flush()  # type: ignore[union-attr]
        self.current = start
        self.points: list[np.ndarray] = []
        self.scores: list[float] = []
        self.settings_tried: list[Settings] = []
        self.best: tuple[Settings, float] | None = None
        self.phase = "warmup" if options.warmup_samples else "search"
        self._warmup_left = options.warmup_samples
        self._design = self._design_points()
        self._searched = 0
        self._windows: list[float] = []
        self._settling = True
        self._below = 0  # samples in a row below the drift bound, once done (continuous)
        self.samples = 0
        self.best_logged = False

    def _design_points(self) -> list[np.ndarray]:
        dims = len(self.space.dimensions)
        if not dims:
            return []
        points = [np.full(dims, x) for x in DESIGN]
        for p in points[1:]:  # the same spread, in another order on each axis
            self._rng.shuffle(p)
        for p in points:
            p[self.space.switches] = np.round(p[self.space.switches])
        return points

    # --- fed by the sampler ------------------------------------------------------------------------

    def window(self, score: float) -> None:
        """One window's score (bytes per microsecond) under the current settings."""
        with self._lock:
            if self._settling:  # the first window after a change: buffers and caches settle
                self._settling = False
                return
            self._windows.append(score)
            if len(self._windows) < self.options.windows_per_sample:
                return
            sample = statistics.median(self._windows)
            self._windows.clear()
            self.samples += 1
            if self.phase == "warmup":
                self._warmup_left -= 1
                if self._warmup_left <= 0:
                    self.phase = "search"
                return
            if self.phase == "done":
                self._watch(sample)
                return
            self._record(sample)
            self._next()

    def _record(self, sample: float) -> None:
        self.settings_tried.append(self.current)
        self.points.append(self.space.point(self.current))
        self.scores.append(sample)
        if self.best is None or sample > self.best[1]:
            self.best = (self.current, sample)
        self._write(self.current, sample)
        _log.info("autotune: %s scored %.4g bytes/us", self.current, sample)

    def _next(self) -> None:
        if not self.space.dimensions:
            self._finish()
            return
        if self._design:
            self._apply(self.space.settings(self._design.pop(0)))
        elif self._searched < self.options.bayes_opt_max_samples:
            self._searched += 1
            point = suggest(
                np.array(self.points),
                np.array(self.scores),
                self.options.gaussian_process_noise,
                self._rng,
                self.space.switches,
            )
            self._apply(self.space.settings(point))
        else:
            self._finish()

    def _finish(self) -> None:
        assert self.best is not None
        self.phase = "done"
        self._apply(self.best[0])
        self.write_best()
        _log.info("autotune: done after %d samples; best %s at %.4g bytes/us", len(self.scores), *self.best)

    def _watch(self, sample: float) -> None:
        """Done: with HOROVOD_AUTOTUNE_CONTINUOUS, search again once throughput drifts away."""
        if not self.options.continuous or self.best is None:
            return
        self._below = self._below + 1 if sample < (1.0 - self.options.drift) * self.best[1] else 0
        if self._below < 2:
            return
        _log.info("autotune: throughput fell to %.4g bytes/us from %.4g: searching again", sample, self.best[1])
        self._below = 0
        self.points, self.scores, self.settings_tried = [], [], []
        self.best, self.best_logged = None, False
        self.phase, self._searched, self._design = "search", 0, self._design_points()
        self._next()

    def _apply(self, settings: Settings) -> None:
        self.current = settings
        self._settling = True
        self._windows.clear()
        self._propose(settings)

    # --- the log -----------------------------------------------------------------------------------

    def _write(self, settings: Settings, score: float) -> None:
        if self._writer is None:
            return
        self._writer.writerow([*settings.row(), f"{score:.6g}"])
        self._log_file.flush()  # type: ignore[union-attr]

    def write_best(self) -> None:
        """The best row, once (when the search ends, or the job ends before it does)."""
        if self.best is None or self.best_logged:
            return
        self.best_logged = True
        self._write(*self.best)

    def state(self) -> dict[str, Any]:
        """What :func:`horovod.common.autotune_state` shows of the search."""
        with self._lock:
            return {
                "phase": self.phase,
                "samples": len(self.scores),
                "current": self.current,
                "best": self.best[0] if self.best else None,
                "best_score": self.best[1] if self.best else None,
                "tried": list(zip(self.settings_tried, self.scores, strict=True)),
            }
