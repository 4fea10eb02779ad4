"""Autotuning (horovod.common.autotune): the search on workloads whose best settings are known, what
it never touches, its log; and in running jobs, that every rank applies rank 0's settings at the
end of the same cycle."""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pytest

import horovod.common as hvd
from horovod.common import state
from horovod.common.autotune import COLUMNS, AutotuneOptions, Search, SearchSpace, Settings
from horovod.common.testing import run_cluster

MiB = 1024 * 1024
DEFAULTS = Settings(fusion_threshold=128 * MiB, cycle_time_ms=1.0)


def known_workload(s: Settings) -> float:
    """Scores peaking at a 64 MiB threshold and a 2 ms cycle, as a throughput in bytes/us would."""
    threshold = math.log2(s.fusion_threshold / MiB + 1) - math.log2(65)
    cycle = math.log10(s.cycle_time_ms) - math.log10(2)
    return 1000.0 * math.exp(-(threshold**2) / 8 - cycle**2 / 0.5)


def run_search(space: SearchSpace, options: AutotuneOptions, score=known_workload, log=None, samples=None) -> Search:
    """Feeds the search the score of whatever it proposes, window by window, until it is done (or
    after `samples` samples)."""
    proposed: list[Settings] = []
    search = Search(space, options, proposed.append, space.fixed, log)
    windows = options.windows_per_sample + 1  # the first after each change is discarded
    limit = (options.warmup_samples + len(space.dimensions) * 10 + options.bayes_opt_max_samples + 10) * windows
    for _ in range(limit):
        if search.phase == "done" or (samples is not None and len(search.scores) >= samples):
            break
        search.window(score(search.current))
    search.proposed = proposed  # type: ignore[attr-defined]
    return search


def options(**kw: object) -> AutotuneOptions:
    base = {"enabled": True, "warmup_samples": 1, "windows_per_sample": 3, "bayes_opt_max_samples": 15}
    return AutotuneOptions(**{**base, **kw})  # type: ignore[arg-type]


def test_the_search_finds_a_known_workloads_best_settings_within_its_budget() -> None:
    search = run_search(SearchSpace.from_env({}, False, DEFAULTS), options())
    assert search.phase == "done"
    assert len(search.scores) <= 1 + 5 + 15  # the start, the spread points, the Bayesian ones
    best, score = search.best
    assert score >= 0.9 * 1000.0, (best, score)  # within 10% of the true optimum
    assert search.proposed[-1] == best  # and kept once done


def test_settings_the_user_fixed_are_never_searched() -> None:
    env = {"HOROVOD_FUSION_THRESHOLD": str(8 * MiB), "HOROVOD_HIERARCHICAL_ALLREDUCE": "0"}
    fixed = Settings(fusion_threshold=8 * MiB, cycle_time_ms=1.0)
    space = SearchSpace.from_env(env, True, fixed)
    assert [d.name for d in space.dimensions] == ["cycle_time_ms", "hierarchical_allgather"]
    search = run_search(space, options())
    assert search.proposed and all(s.fusion_threshold == 8 * MiB for s in search.proposed)
    assert all(not s.hierarchical_allreduce for s in search.proposed)
    assert {s.hierarchical_allgather for s in search.proposed} == {False, True}  # switches are searched


def test_the_hierarchical_switches_are_searched_only_across_hosts() -> None:
    assert [d.name for d in SearchSpace.from_env({}, False, DEFAULTS).dimensions] == [
        "fusion_threshold",
        "cycle_time_ms",
    ]
    assert len(SearchSpace.from_env({}, True, DEFAULTS).dimensions) == 4


def test_the_bounds_hold_the_defaults_and_no_fusion() -> None:
    space = SearchSpace.from_env({}, False, DEFAULTS)
    for settings in (DEFAULTS, Settings(0, 50.0), Settings(64 * MiB, 0.1), Settings(256 * MiB, 100.0)):
        back = space.settings(space.point(settings))
        assert abs(back.fusion_threshold - settings.fusion_threshold) <= MiB // 1000 + 1
        assert back.cycle_time_ms == pytest.approx(settings.cycle_time_ms)


def test_the_log_has_horovods_columns_a_row_per_sample_and_the_best_last() -> None:
    log = io.StringIO()
    search = run_search(SearchSpace.from_env({}, False, DEFAULTS), options(), log=log)
    rows = list(csv.reader(io.StringIO(log.getvalue())))
    assert (
        rows[0]
        == COLUMNS
        == [
            "hierarchical_allreduce",
            "hierarchical_allgather",
            "cycle_time_ms",
            "tensor_fusion_threshold",
            "score",
        ]
    )
    assert len(rows) == 1 + len(search.scores) + 1
    best, score = search.best
    assert rows[-1] == [*best.row(), f"{score:.6g}"]


def test_a_job_ending_mid_search_still_writes_the_best_row() -> None:
    log = io.StringIO()
    search = run_search(SearchSpace.from_env({}, False, DEFAULTS), options(), log=log, samples=3)
    assert search.phase != "done" and len(search.scores) == 3
    search.write_best()
    search.write_best()  # once
    rows = list(csv.reader(io.StringIO(log.getvalue())))
    assert len(rows) == 1 + 3 + 1 and rows[-1][-1] == f"{search.best[1]:.6g}"


def test_continuous_tuning_searches_again_when_throughput_drifts() -> None:
    search = run_search(SearchSpace.from_env({}, False, DEFAULTS), options(continuous=True))
    assert search.phase == "done"
    for _ in range(3 * 4):  # the workload halves: two samples in a row far below the best
        search.window(search.best[1] / 2 if search.best else 1.0)
    assert search.phase == "search"


def test_bad_knobs_are_named() -> None:
    with pytest.raises(ValueError, match="HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE='x'"):
        AutotuneOptions.from_env({"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "x"})
    with pytest.raises(ValueError, match="'threshold' is not one of fusion_threshold_mb, cycle_time_ms"):
        AutotuneOptions.from_env({"HOROVOD_AUTOTUNE_START": "threshold=1"}).start_values()


# --- in running jobs ---------------------------------------------------------------------------------


def case_rank_zeros_settings_everywhere() -> list:
    """Rank 0 proposes settings while every rank trains on the global set and on a process set."""
    evens = hvd.ProcessSet([0, 2])
    hvd.init(process_sets=[evens])
    n, rank = hvd.size(), hvd.rank()
    engine = state.context().engine
    proposals = [(4 * MiB, 3000), (0, 200), (64 * MiB, 1500)]
    if rank != 0:
        with pytest.raises(ValueError, match="proposed on rank 0"):
            engine.propose_settings(1, 1000, False, False)
    for step in range(60):
        if rank == 0 and step % 20 == 5:
            engine.propose_settings(*proposals[step // 20], False, False)
        hvd.allreduce(np.ones(1000), name="grad.a", op=hvd.Sum)
        if evens.included():
            hvd.allreduce(np.ones(10), name="grad.b", op=hvd.Sum, process_set=evens)
    hvd.barrier()
    return [dict(engine.current_settings()), n]


def test_every_rank_applies_rank_zeros_settings_at_the_end_of_the_same_cycle() -> None:
    results = run_cluster(case_rank_zeros_settings_everywhere, 3)
    settings = [r[0] for r in results]
    assert all(s == settings[0] for s in settings), settings
    assert settings[0]["epoch"] == 3 and settings[0]["cycle"] > 0
    assert settings[0]["fusion_threshold"] == 64 * MiB and settings[0]["cycle_time_us"] == 1500


def case_autotuned_job() -> dict:
    hvd.init()
    grads = [np.ones(n, np.float32) for n in (1000, 30000, 7)]
    for _ in range(400):
        handles = [hvd.allreduce_async(g, name=f"g{i}", op=hvd.Sum) for i, g in enumerate(grads)]
        for h in handles:
            hvd.synchronize(h)
    result = hvd.autotune_state()
    hvd.shutdown()
    return result


def test_an_autotuned_job_searches_on_rank_zero_and_keeps_what_the_user_fixed(tmp_path) -> None:
    log = tmp_path / "autotune.csv"
    env = {
        "HOROVOD_AUTOTUNE": "1",
        "HOROVOD_AUTOTUNE_LOG": str(log),
        "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "4",
        "HOROVOD_AUTOTUNE_WINDOWS_PER_SAMPLE": "2",
        "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "1",
        "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "3",
        "HOROVOD_CYCLE_TIME": "2.5",  # fixed by the user: never changed
        "HOROVOD_AUTOTUNE_START": "fusion_threshold_mb=0",  # a starting point, not fixed
    }
    results = run_cluster(case_autotuned_job, 3, env=env, timeout=240)
    assert results[0]["search"] is not None and all(r["search"] is None for r in results[1:])
    search = results[0]["search"]
    assert search["samples"] >= 2 and search["tried"][0][0].fusion_threshold == 0
    assert all(s.cycle_time_ms == 2.5 for s, _ in search["tried"])
    settings = [r["settings"] for r in results]
    assert all(s == settings[0] for s in settings) and settings[0]["cycle_time_us"] == 2500
    rows = list(csv.reader(io.StringIO(log.read_text())))
    assert rows[0] == COLUMNS and len(rows) >= 1 + search["samples"]
    assert rows[-1][-1] == f"{search['best_score']:.6g}"  # the best row, also when cut short
