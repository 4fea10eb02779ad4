"""This machine's network interfaces and their IPv4 networks, and which of them a job's hosts share.

A job across hosts needs two things from the network: an interface name every host has, on one
network they all share (the ranks' backends listen on it: ``HOROVOD_GLOO_IFACE``), and an address of
the launcher's machine on that network (the rendezvous server binds there, and only there).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping, Sequence

import psutil

from horovod.runner.errors import UsageError

#: interface name -> its IPv4 addresses with their prefix ("198.18.0.10/24").
Interfaces = dict[str, list[str]]


def local_interfaces() -> Interfaces:
    """The interfaces of this machine (its network namespace) that are up, with IPv4 addresses,
    loopback excluded."""
    stats = psutil.net_if_stats()
    found: Interfaces = {}
    for name, addresses in psutil.net_if_addrs().items():
        stat = stats.get(name)
        if stat is None or not stat.isup:
            continue
        for a in addresses:
            if a.family != socket.AF_INET or not a.netmask:
                continue
            interface = ipaddress.IPv4Interface(f"{a.address}/{a.netmask}")
            if interface.ip.is_loopback:
                continue
            found.setdefault(name, []).append(interface.with_prefixlen)
    return found


def local_addresses() -> frozenset[str]:
    """Every address assigned to this machine, loopback included."""
    return frozenset(
        a.address.split("%", 1)[0]
        for addresses in psutil.net_if_addrs().values()
        for a in addresses
        if a.family in (socket.AF_INET, socket.AF_INET6)
    )


def _networks(addresses: Sequence[str]) -> set[ipaddress.IPv4Network]:
    return {ipaddress.IPv4Interface(a).network for a in addresses}


def _listing(by_host: Mapping[str, Interfaces]) -> str:
    parts = []
    for host, interfaces in by_host.items():
        shown = ", ".join(f"{n} {' '.join(a)}" for n, a in sorted(interfaces.items())) or "no IPv4 interface"
        parts.append(f"{host}: {shown}")
    return "; ".join(parts)


def common_network(by_host: Mapping[str, Interfaces], nic: str) -> ipaddress.IPv4Network | None:
    """The network every host has an address on through interface ``nic``, if there is one."""
    shared: set[ipaddress.IPv4Network] | None = None
    for interfaces in by_host.values():
        networks = _networks(interfaces.get(nic, []))
        shared = networks if shared is None else shared & networks
    return min(shared, key=str) if shared else None


def choose_interfaces(
    by_host: Mapping[str, Interfaces], given: Sequence[str] | None
) -> list[tuple[str, ipaddress.IPv4Network]]:
    """The interfaces the ranks use, each with the network the hosts share through it.

    ``given``: the names from --network-interface, checked on every host; else every interface name
    all hosts have on one shared network, in name order. Raises UsageError naming what is missing.
    """
    if given:
        chosen = []
        for nic in given:
            lacking = [h for h, interfaces in by_host.items() if nic not in interfaces]
            if lacking:
                raise UsageError(
                    f"--network-interface {nic}: host(s) {', '.join(lacking)} have no interface {nic} with an IPv4 "
                    f"address ({_listing({h: by_host[h] for h in lacking})})"
                )
            network = common_network(by_host, nic)
            if network is None:
                raise UsageError(
                    f"--network-interface {nic}: the hosts' addresses on {nic} are not on one network "
                    f"({_listing(by_host)})"
                )
            chosen.append((nic, network))
        return chosen
    names = sorted(set.intersection(*(set(interfaces) for interfaces in by_host.values()))) if by_host else []
    chosen = [(nic, net) for nic in names if (net := common_network(by_host, nic)) is not None]
    if not chosen:
        raise UsageError(
            "the hosts share no network interface on a common network, so their ranks could not reach each "
            f"other ({_listing(by_host)}); name one with --network-interface"
        )
    return chosen


def address_on(network: ipaddress.IPv4Network, interfaces: Interfaces) -> str | None:
    """This machine's address on ``network``, if it has one."""
    for addresses in interfaces.values():
        for a in addresses:
            interface = ipaddress.IPv4Interface(a)
            if interface.ip in network:
                return str(interface.ip)
    return None
