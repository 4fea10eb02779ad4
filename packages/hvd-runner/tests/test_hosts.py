"""-H / --hostfile parsing, local host detection and rank placement."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from horovod.runner.errors import UsageError
from horovod.runner.hosts import Host, is_local, parse_hostfile, parse_hosts, place_ranks


def test_parse_hosts() -> None:
    assert parse_hosts("localhost:2") == [Host("localhost", 2)]
    assert parse_hosts("a:1, b:3,c") == [Host("a", 1), Host("b", 3), Host("c", 1)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("localhost:x", "slots 'x' of host 'localhost' must be a positive integer"),
        ("localhost:0", "slots '0' of host 'localhost' must be a positive integer"),
        ("localhost:-1", "must be a positive integer"),
        (":2", "empty host name"),
        ("localhost:2,", "empty entry"),
        ("", "no hosts given"),
        ("bad host:2", "not a valid host name"),
        ("a:1,a:2", "listed twice"),
    ],
)
def test_malformed_hosts(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_hosts(text)


def test_parse_hostfile(tmp_path: Path) -> None:
    path = tmp_path / "hosts"
    path.write_text("# the cluster\nlocalhost slots=2\n\n127.0.0.1 slots=1  # trailing comment\nmyhost\n")
    assert parse_hostfile(str(path)) == [Host("localhost", 2), Host("127.0.0.1", 1), Host("myhost", 1)]


def test_hostfile_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        parse_hostfile(str(tmp_path / "missing"))
    bad = tmp_path / "bad"
    bad.write_text("localhost slots=2\nhost2 cpus=4\n")
    with pytest.raises(UsageError, match=r"bad:2: expected '<hostname> slots=<N>'"):
        parse_hostfile(str(bad))
    bad.write_text("localhost slots=two\n")
    with pytest.raises(UsageError, match="bad:1: slots 'two'"):
        parse_hostfile(str(bad))
    bad.write_text("# nothing\n")
    with pytest.raises(UsageError, match="lists no hosts"):
        parse_hostfile(str(bad))


def test_local_names() -> None:
    for name in ("localhost", "127.0.0.1", "127.0.1.1", socket.gethostname(), "LOCALHOST"):
        assert is_local(name), name
    assert not is_local("hvd-no-such-remote-host")
    assert not is_local("10.255.255.1")


def test_placement_fills_hosts_in_order() -> None:
    placements = place_ranks([Host("a", 2), Host("b", 2)], 3)
    assert [(p.rank, p.hostname, p.local_rank, p.local_size, p.cross_rank, p.cross_size) for p in placements] == [
        (0, "a", 0, 2, 0, 2),
        (1, "a", 1, 2, 0, 1),  # only host a runs a local rank 1
        (2, "b", 0, 1, 1, 2),
    ]
    assert all(p.size == 3 for p in placements)


def test_placement_single_host() -> None:
    placements = place_ranks([Host("localhost", 4)], 4)
    assert [(p.local_rank, p.local_size, p.cross_rank, p.cross_size) for p in placements] == [
        (r, 4, 0, 1) for r in range(4)
    ]


def test_more_ranks_than_slots() -> None:
    with pytest.raises(UsageError, match=r"-np 5 asks for more processes than the 3 slots available \(a:1,b:2\)"):
        place_ranks([Host("a", 1), Host("b", 2)], 5)
