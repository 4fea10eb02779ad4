"""HOROVOD_* knobs: Horovod's defaults, clear errors for bad values, no silent no-ops."""

from __future__ import annotations

import logging

import pytest

from horovod.common import _core, config
from horovod.common.config import engine_config, topology_from_env


def _config(**env: str):
    return engine_config(_core, env, rank=0, size=1, key_prefix="t")


def test_defaults_are_horovods() -> None:
    c = _config()
    assert c.fusion_threshold == 128 * 1024 * 1024 and c.cycle_time_ms == 1.0 and c.cache_capacity == 1024
    assert c.stall_check_enabled and c.stall_check_s == 60.0 and c.stall_shutdown_s == 0.0
    assert c.timeout_ms == 30000 and c.log_level == 3 and not c.dynamic_process_sets


def test_knobs_are_read() -> None:
    c = _config(
        HOROVOD_FUSION_THRESHOLD="0",
        HOROVOD_CYCLE_TIME="2.5",
        HOROVOD_CACHE_CAPACITY="7",
        HOROVOD_STALL_CHECK_DISABLE="1",
        HOROVOD_STALL_SHUTDOWN_TIME_SECONDS="9",
        HOROVOD_LOG_LEVEL="debug",
        HOROVOD_GLOO_TIMEOUT_SECONDS="4",
        HOROVOD_TIMELINE="/tmp/x.json",
        HOROVOD_DYNAMIC_PROCESS_SETS="true",
    )
    assert (c.fusion_threshold, c.cycle_time_ms, c.cache_capacity) == (0, 2.5, 7)
    assert not c.stall_check_enabled and c.stall_shutdown_s == 9.0 and c.log_level == 1
    assert c.timeout_ms == 4000 and c.timeline_path == "/tmp/x.json" and c.dynamic_process_sets
    assert _config(HOROVOD_TIMELINE="DYNAMIC").timeline_path == ""


@pytest.mark.parametrize(
    "env, fragment",
    [
        ({"HOROVOD_FUSION_THRESHOLD": "lots"}, "HOROVOD_FUSION_THRESHOLD='lots' is not an integer"),
        ({"HOROVOD_CACHE_CAPACITY": "-1"}, "HOROVOD_CACHE_CAPACITY=-1 must be at least 0"),
        ({"HOROVOD_CYCLE_TIME": "fast"}, "HOROVOD_CYCLE_TIME='fast' is not a number"),
        ({"HOROVOD_LOG_LEVEL": "loud"}, "HOROVOD_LOG_LEVEL='loud' is not one of"),
        ({"HOROVOD_STALL_CHECK_DISABLE": "maybe"}, "is not a boolean"),
    ],
)
def test_bad_values_name_the_variable(env: dict, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        _config(**env)


def test_unimplemented_knobs_warn(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="horovod"):
        _config(HOROVOD_TORUS_ALLREDUCE="1")
    assert any("HOROVOD_TORUS_ALLREDUCE" in r.getMessage() and "no effect" in r.getMessage() for r in caplog.records)


def test_autotune_starts_the_engine_where_asked_and_keeps_what_the_user_set() -> None:
    c = _config(HOROVOD_AUTOTUNE="1", HOROVOD_AUTOTUNE_START="fusion_threshold_mb=0,cycle_time_ms=50")
    assert c.autotune and c.fusion_threshold == 0 and c.cycle_time_ms == 50.0
    assert not _config().autotune


def test_hierarchical_allreduce_groups_ranks_by_the_launchers_host(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="horovod"):
        c = engine_config(
            _core,
            {"HOROVOD_HIERARCHICAL_ALLREDUCE": "1", "HOROVOD_HOSTNAME": "node7"},
            rank=3,
            size=4,
            key_prefix="t",
            local_rank=1,
        )
    assert c.hierarchical_allreduce and c.host_key == "node7" and c.local_rank == 1
    assert not caplog.records  # implemented: no "has no effect" warning
    assert not _config().hierarchical_allreduce


def test_hierarchical_allreduce_in_a_world_of_some_ranks_says_it_has_no_effect(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="horovod"):
        c = engine_config(_core, {"HOROVOD_HIERARCHICAL_ALLREDUCE": "1"}, rank=0, size=2, key_prefix="t")
    assert not c.hierarchical_allreduce
    assert any("HOROVOD_HIERARCHICAL_ALLREDUCE has no effect" in r.getMessage() for r in caplog.records)


def test_topology_from_launcher_variables() -> None:
    t = topology_from_env(
        {"HOROVOD_RANK": "3", "HOROVOD_SIZE": "4", "HOROVOD_LOCAL_RANK": "1", "HOROVOD_LOCAL_SIZE": "2"}
    )
    assert (t.rank, t.size, t.local_rank, t.local_size, t.cross_rank, t.cross_size) == (3, 4, 1, 2, 1, 2)
    with pytest.raises(ValueError, match="HOROVOD_RANK=4 is out of range"):
        topology_from_env({"HOROVOD_RANK": "4", "HOROVOD_SIZE": "4"})


def test_thread_affinity_takes_this_local_ranks_core() -> None:
    assert config.thread_affinity({}, 0) == -1
    assert config.thread_affinity({"HOROVOD_THREAD_AFFINITY": "3"}, 1) == 3  # one core for every rank
    assert config.thread_affinity({"HOROVOD_THREAD_AFFINITY": "0,2,4"}, 1) == 2
    with pytest.raises(ValueError, match="lists 2 cores, but this is local rank 2"):
        config.thread_affinity({"HOROVOD_THREAD_AFFINITY": "0,1"}, 2)
    with pytest.raises(ValueError, match="must list core numbers"):
        config.thread_affinity({"HOROVOD_THREAD_AFFINITY": "first"}, 0)


def test_the_engine_thread_is_named_and_pinned() -> None:
    import pathlib

    import horovod.common as hvd
    from horovod.common.testing import run_cluster

    def case() -> list[str]:
        hvd.init()
        allowed = []
        for task in pathlib.Path("/proc/self/task").iterdir():
            if (task / "comm").read_text().strip() == "hvd-engine":
                status = (task / "status").read_text().splitlines()
                allowed += [line.split(":")[1].strip() for line in status if line.startswith("Cpus_allowed_list")]
        return allowed

    assert run_cluster(case, 1, env={"HOROVOD_THREAD_AFFINITY": "0"}) == [["0"]]
