"""No silent no-ops: every Horovod knob hvd accepts but does not act on is named, once, with why.

Parametrized over the one list of them, ``horovod.common.config.INACTIVE_KNOBS``.
"""

from __future__ import annotations

import logging

import pytest

from horovod.common import _core, config

KNOBS = sorted(config.INACTIVE_KNOBS)
SWITCHES = [name for name in KNOBS if config.INACTIVE_KNOBS[name].switch]


@pytest.fixture(autouse=True)
def _fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a new process: no knob warned about yet."""
    monkeypatch.setattr(config, "_warned", set())


def _asking(name: str) -> str:
    return "1" if config.INACTIVE_KNOBS[name].switch else "7"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "horovod" and r.levelno == logging.WARNING]


@pytest.mark.parametrize("name", KNOBS)
def test_knob_warns_once_by_name_saying_why(name: str, caplog: pytest.LogCaptureFixture) -> None:
    env = {name: _asking(name)}
    with caplog.at_level(logging.WARNING, logger="horovod"):
        config.engine_config(_core, env, rank=0, size=2, key_prefix="t", local_rank=0)
        config.engine_config(_core, env, rank=0, size=2, key_prefix="t", local_rank=0)  # init() again
    messages = _warnings(caplog)
    assert messages == [f"{name} is set, but it has no effect: {config.INACTIVE_KNOBS[name].why}"]


@pytest.mark.parametrize("name", KNOBS)
def test_only_rank_0_warns(name: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="horovod"):
        config.engine_config(_core, {name: _asking(name)}, rank=1, size=2, key_prefix="t", local_rank=1)
    assert _warnings(caplog) == []


@pytest.mark.parametrize("name", SWITCHES)
@pytest.mark.parametrize("off", ["0", "false", "", "off"])
def test_a_switch_turned_off_asks_for_nothing(name: str, off: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="horovod"):
        config.engine_config(_core, {name: off}, rank=0, size=1, key_prefix="t")
    assert _warnings(caplog) == []


def test_every_knob_set_at_once_warns_once_each(caplog: pytest.LogCaptureFixture) -> None:
    env = {name: _asking(name) for name in KNOBS}
    assert config.inactive_knobs_set(env) == list(config.INACTIVE_KNOBS)
    with caplog.at_level(logging.WARNING, logger="horovod"):
        config.engine_config(_core, env, rank=0, size=1, key_prefix="t")
    messages = _warnings(caplog)
    assert len(messages) == len(KNOBS)
    assert all(any(m.startswith(f"{name} is set") for m in messages) for name in KNOBS)


@pytest.mark.parametrize(
    "name",
    [
        "HOROVOD_HIERARCHICAL_ALLREDUCE",  # implemented
        "HOROVOD_FUSION_THRESHOLD",
        "HOROVOD_CYCLE_TIME",
        "HOROVOD_CACHE_CAPACITY",
        "HOROVOD_TIMELINE",
        "HOROVOD_STALL_CHECK_TIME_SECONDS",
        "HOROVOD_LOG_HIDE_TIME",
        "HOROVOD_MPI_THREADS_DISABLE",  # read by the MPI backend
        "HOROVOD_GLOO_TIMEOUT_SECONDS",
    ],
)
def test_knobs_hvd_acts_on_are_not_listed(name: str, caplog: pytest.LogCaptureFixture) -> None:
    assert name not in config.INACTIVE_KNOBS
    with caplog.at_level(logging.WARNING, logger="horovod"):
        config.engine_config(_core, {name: "1", "HOROVOD_HOSTNAME": "h"}, rank=0, size=2, key_prefix="t", local_rank=0)
    assert _warnings(caplog) == []


def test_every_reason_says_something() -> None:
    for name, knob in config.INACTIVE_KNOBS.items():
        assert name.startswith("HOROVOD_") and knob.why.strip(), name
