"""The elastic driver's parts, in one process: discovery output, the blacklist and its cool-down,
the flags, and the protocol's messages. (Whole jobs: test_elastic.py.)"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from horovod.common.plugin_api import elastic_protocol as protocol
from horovod.runner import cli
from horovod.runner.elastic import settings as elastic_settings
from horovod.runner.elastic.discovery import DiscoveryError, FixedHosts, HostDiscoveryScript, parse_discovery_output
from horovod.runner.elastic.host_manager import HostManager, HostUpdateResult
from horovod.runner.errors import UsageError
from horovod.runner.settings import is_elastic


def test_discovery_output() -> None:
    text = "# hosts\nh1:2\n\nh2:1  # comment\nh3\n"
    assert parse_discovery_output(text, default_slots=4) == {"h1": 2, "h2": 1, "h3": 4}
    with pytest.raises(DiscoveryError, match="printed 'h3' without slots: print host:slots, or give --slots-per-host"):
        parse_discovery_output("h3\n", default_slots=None)
    with pytest.raises(DiscoveryError, match="slots 'x' of host 'h1' must be a positive integer"):
        parse_discovery_output("h1:x\n", default_slots=None)
    with pytest.raises(DiscoveryError, match="host 'h1' is listed twice"):
        parse_discovery_output("h1:1\nh1:2\n", default_slots=None)
    assert parse_discovery_output("", default_slots=None) == {}


def test_discovery_script_failures_are_named(tmp_path: Path) -> None:
    failing = tmp_path / "fail.sh"
    failing.write_text("#!/bin/sh\necho 'no cloud today' >&2\nexit 4\n")
    failing.chmod(0o755)
    with pytest.raises(DiscoveryError, match=r"fail\.sh' exited with code 4: no cloud today"):
        HostDiscoveryScript(str(failing)).find_available_hosts_and_slots()
    slow = tmp_path / "slow.sh"
    slow.write_text("#!/bin/sh\nsleep 10\n")
    slow.chmod(0o755)
    with pytest.raises(DiscoveryError, match=r"did not finish within 0\.5 s"):
        HostDiscoveryScript(str(slow), timeout_s=0.5).find_available_hosts_and_slots()
    good = tmp_path / "good.sh"
    good.write_text("#!/bin/sh\necho a:2\necho b\n")
    good.chmod(0o755)
    assert HostDiscoveryScript(str(good), slots=3).find_available_hosts_and_slots() == {"a": 2, "b": 3}
    assert FixedHosts({"a": 1}).find_available_hosts_and_slots() == {"a": 1}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_host_updates_keep_first_seen_order() -> None:
    manager = HostManager()
    assert manager.update({"a": 2}) == HostUpdateResult.added
    assert manager.update({"b": 1, "a": 2}) == HostUpdateResult.added
    assert list(manager.current_hosts) == ["a", "b"]  # a was first seen first
    assert manager.update({"b": 1, "a": 2}) == HostUpdateResult.no_update
    assert manager.update({"b": 2, "a": 1}) == HostUpdateResult.mixed  # slots moved from a to b
    assert manager.update({"b": 2}) == HostUpdateResult.removed
    assert manager.current_hosts == {"b": 2}


def test_blacklist_without_cooldown_is_for_good() -> None:
    clock = Clock()
    manager = HostManager(clock=clock)
    manager.update({"a": 1, "b": 1})
    assert manager.blacklist("b") == float("inf")
    clock.now += 1e6
    assert manager.update({"a": 1, "b": 1}) == HostUpdateResult.no_update
    assert manager.current_hosts == {"a": 1}
    assert manager.blacklisted_hosts() == ["b"] and not manager.any_coming_back()


def test_blacklist_cooldown_doubles_up_to_max_and_host_comes_back() -> None:
    clock = Clock()
    manager = HostManager(cooldown_range=(10, 30), clock=clock, rng=random.Random(0))
    manager.update({"a": 1, "b": 1})
    first = manager.blacklist("b")
    assert 10 <= first <= 11 and manager.current_hosts == {"a": 1} and manager.any_coming_back()
    clock.now += first + 0.01
    assert manager.update({"a": 1, "b": 1}) == HostUpdateResult.added
    assert list(manager.current_hosts) == ["a", "b"]
    assert 20 <= manager.blacklist("b") <= 22
    assert manager.blacklist("b") == 30  # 40, capped at MAX (jitter included)


def elastic_job(*argv: str, environ: dict[str, str] | None = None) -> elastic_settings.ElasticSettings:
    ns = cli.parse([*argv, "python", "train.py"])
    assert is_elastic(ns)
    return elastic_settings.from_namespace(ns, environ=environ or {})


def test_elastic_flags() -> None:
    s = elastic_job("-np", "2", "--min-np", "1", "--max-np", "4", "-H", "localhost:4", "--reset-limit", "3")
    assert (s.min_np, s.max_np, s.driver.initial_np, s.reset_limit, s.elastic_timeout) == (1, 4, 2, 3, 600.0)
    assert isinstance(s.discovery, FixedHosts)
    assert elastic_job("--min-np", "2").driver.initial_np == 2  # -np defaults to --min-np
    assert elastic_job("-np", "2", "--max-np", "3").min_np == 2  # --min-np defaults to -np
    assert elastic_job("--min-np", "1", environ={"HOROVOD_ELASTIC_TIMEOUT": "42"}).elastic_timeout == 42.0
    cooldown = elastic_job("--min-np", "1", "--blacklist-cooldown-range", "5", "50", "--elastic-timeout", "9")
    assert cooldown.cooldown_range == (5, 50) and cooldown.elastic_timeout == 9.0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-np", "2"], "an elastic job needs --min-np"),
        (["--min-np", "3", "--max-np", "2"], r"--min-np 3 <= -np 3 <= --max-np 2 does not hold"),
        (["--min-np", "1", "--blacklist-cooldown-range", "9", "3"], "MIN must not exceed MAX"),
    ],
)
def test_bad_elastic_flags(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        elastic_job(*argv)


def test_discovery_script_failing_at_start_is_a_usage_error(tmp_path: Path) -> None:
    script = tmp_path / "bad.sh"
    script.write_text("#!/bin/sh\necho 'a:zero'\n")
    script.chmod(0o755)
    with pytest.raises(UsageError, match="slots 'zero' of host 'a'"):
        elastic_job("--min-np", "1", "--host-discovery-script", str(script))


def test_protocol_messages_round_trip_and_refuse_garbage() -> None:
    a = protocol.Assignment(generation=3, rank=1, size=2, hostname="h", updates_seen=4, updates_timestamp=1.5)
    assert protocol.Assignment.decode(a.encode()) == a
    newer = b'{"generation": 1, "rank": 0, "size": 1, "a_field_from_the_future": 7}'
    assert protocol.Assignment.decode(newer).generation == 1
    with pytest.raises(ValueError, match="malformed elastic WorldRequest"):
        protocol.WorldRequest.decode(b"\x80 not json")
    keys = {protocol.request_key("j", "1"), protocol.assignment_key("j", "1", 0), protocol.hosts_update_key("j", 1)}
    assert len(keys) == 3 and protocol.request_key("j", "1").startswith(protocol.request_prefix("j"))
