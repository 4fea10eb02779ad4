"""Hosts and slots (-H, --hostfile), which of them are this machine, and where each rank goes."""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import os
import re
import socket

from horovod.runner.errors import UsageError

_HOSTNAME_RE = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9._-]*[A-Za-z0-9_])?$")


@dataclasses.dataclass(frozen=True)
class Host:
    name: str
    slots: int


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where one rank runs, and its place in the job (Horovod's definitions of local and cross)."""

    rank: int
    size: int
    local_rank: int
    local_size: int
    cross_rank: int
    cross_size: int
    hostname: str


def _check_name(name: str, where: str) -> str:
    if not name:
        raise UsageError(f"{where}: empty host name")
    if not _HOSTNAME_RE.match(name):
        raise UsageError(f"{where}: {name!r} is not a valid host name")
    return name


def _check_slots(text: str, name: str, where: str) -> int:
    try:
        slots = int(text)
    except ValueError:
        slots = 0
    if slots < 1 or not text.strip().isdigit():
        raise UsageError(f"{where}: slots {text!r} of host {name!r} must be a positive integer")
    return slots


def _no_duplicates(hosts: list[Host], where: str) -> list[Host]:
    seen: set[str] = set()
    for host in hosts:
        if host.name in seen:
            raise UsageError(f"{where}: host {host.name!r} is listed twice; give its slots once")
        seen.add(host.name)
    return hosts


def parse_hosts(text: str, where: str = "-H/--hosts") -> list[Host]:
    """``host1:2,host2:4`` (a host without ``:slots`` has one slot)."""
    if not text or not text.strip():
        raise UsageError(f"{where}: no hosts given")
    hosts = []
    for entry in text.split(","):
        entry = entry.strip()
        context = f"{where} entry {entry!r}"
        if not entry:
            raise UsageError(f"{where} {text!r}: empty entry (stray comma?)")
        if ":" in entry:
            name, _, slots_text = entry.rpartition(":")
            _check_name(name, context)
            hosts.append(Host(name, _check_slots(slots_text, name, context)))
        else:
            hosts.append(Host(_check_name(entry, context), 1))
    return _no_duplicates(hosts, where)


def parse_hostfile(path: str) -> list[Host]:
    """A host file: one ``<hostname> slots=<N>`` per line (``slots`` defaults to 1), ``#`` comments."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise UsageError(f"--hostfile: {path!r} does not exist") from None
    except OSError as error:
        raise UsageError(f"--hostfile: cannot read {path!r}: {error.strerror or error}") from None
    hosts = []
    for number, line in enumerate(lines, start=1):
        where = f"--hostfile {path}:{number}"
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        name, slots = _check_name(fields[0], where), 1
        for field in fields[1:]:
            key, eq, value = field.partition("=")
            if key != "slots" or not eq:
                raise UsageError(f"{where}: expected '<hostname> slots=<N>', got {line.strip()!r}")
            slots = _check_slots(value, name, where)
        hosts.append(Host(name, slots))
    if not hosts:
        raise UsageError(f"--hostfile: {path!r} lists no hosts")
    return _no_duplicates(hosts, f"--hostfile {path}")


@functools.lru_cache(maxsize=1)
def local_names() -> frozenset[str]:
    """Names and addresses that mean this machine (lower case)."""
    names = {"localhost", "localhost.localdomain", "127.0.0.1", "::1"}
    for name in (socket.gethostname(), socket.getfqdn(), os.uname().nodename):
        if name:
            names.add(name.lower())
            names.add(name.lower().split(".")[0])
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None):
            names.add(str(info[4][0]).lower())
    except OSError:
        pass
    return frozenset(names)


def is_local(name: str) -> bool:
    """Whether ``name`` is this machine: one of its names, or an address of one of its interfaces
    (resolved: a cluster's name for this machine counts too), so its ranks need no ssh."""
    lowered = name.lower()
    if lowered in local_names():
        return True
    try:
        return ipaddress.ip_address(lowered).is_loopback or lowered in _interface_addresses()
    except ValueError:
        pass
    try:
        resolved = {str(info[4][0]) for info in socket.getaddrinfo(name, None)}
    except OSError:
        return False  # unknown here: ssh will say so when it is reached
    return any(ipaddress.ip_address(a.split("%", 1)[0]).is_loopback for a in resolved) or bool(
        resolved & _interface_addresses()
    )


def _interface_addresses() -> frozenset[str]:
    from horovod.runner.interfaces import local_addresses

    return local_addresses()


def place_ranks(hosts: list[Host], np: int) -> list[Placement]:
    """Fills hosts in order, each up to its slots, until ``np`` ranks are placed.

    ``local_*``: among the ranks of one host; ``cross_*``: among the ranks with the same local rank,
    one per host (Horovod's definitions, which hold for uneven hosts too).
    """
    total = sum(h.slots for h in hosts)
    if np > total:
        listed = ",".join(f"{h.name}:{h.slots}" for h in hosts)
        raise UsageError(f"-np {np} asks for more processes than the {total} slots available ({listed})")
    per_host: list[tuple[str, int]] = []
    remaining = np
    for host in hosts:
        count = min(host.slots, remaining)
        if count:
            per_host.append((host.name, count))
        remaining -= count
    placements = []
    rank = 0
    for host_index, (name, count) in enumerate(per_host):
        for local_rank in range(count):
            # Hosts that run a rank with this local rank, in host order.
            peers = [i for i, (_, c) in enumerate(per_host) if c > local_rank]
            placements.append(
                Placement(
                    rank=rank,
                    size=np,
                    local_rank=local_rank,
                    local_size=count,
                    cross_rank=peers.index(host_index),
                    cross_size=len(peers),
                    hostname=name,
                )
            )
            rank += 1
    return placements


def ranks_by_host(hosts: list[str]) -> list[Placement]:
    """For workers that another system placed (a host per worker, in the order they were made):
    each worker's placement, in the same order. Ranks go host by host, in the order each host's
    first worker appears, so that local ranks count the workers of one host, as Horovod defines them."""
    order = list(dict.fromkeys(hosts))
    placements = place_ranks([Host(h, hosts.count(h)) for h in order], len(hosts))
    by_host: dict[str, list[Placement]] = {}
    for p in placements:
        by_host.setdefault(p.hostname, []).append(p)
    return [by_host[h].pop(0) for h in hosts]
