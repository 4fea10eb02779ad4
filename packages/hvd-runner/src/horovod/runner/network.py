"""The network of a job across hosts: which interface the ranks use, and where the rendezvous
server listens (:mod:`horovod.runner.interfaces` says how each is chosen)."""

from __future__ import annotations

import dataclasses
import sys

from horovod.runner.settings import JobSettings


@dataclasses.dataclass(frozen=True)
class JobNetwork:
    #: The address the rendezvous server binds to (and only that one).
    rendezvous_host: str
    #: Interfaces the ranks use, first one first (HOROVOD_GLOO_IFACE); empty on one machine.
    nics: tuple[str, ...] = ()
    #: What was decided, for --verbose.
    description: str = ""


def prepare(settings: JobSettings) -> JobNetwork:
    """Checks every remote host over ssh and chooses the job's interfaces; raises HostCheckError or
    UsageError naming the host and the problem. A job on this machine alone needs nothing."""
    if not settings.remote_hosts:
        return JobNetwork(settings.rendezvous_host)
    # Only a job across hosts needs these (psutil among them): a job on one machine starts without.
    from horovod.runner.host_check import HostCheckError, check_hosts
    from horovod.runner.interfaces import address_on, choose_interfaces, local_interfaces

    infos = check_hosts(
        settings.remote_hosts,
        settings.ssh,
        sys.executable,
        timeout_s=settings.start_timeout_s,
        use_cache=settings.use_host_cache,
    )
    here = local_interfaces()
    by_host = {}
    for p in settings.placements:
        if p.hostname not in by_host:
            by_host[p.hostname] = infos[p.hostname].interfaces if p.hostname in infos else here
    chosen = choose_interfaces(by_host, settings.nics or None)
    nic, network = chosen[0]
    address = address_on(network, here)
    if address is None:
        mine = ", ".join(f"{n} {' '.join(a)}" for n, a in sorted(here.items())) or "no IPv4 interface"
        raise HostCheckError(
            f"this machine has no address on {network}, the network the hosts share through {nic}, so the ranks "
            f"could not reach its rendezvous server (it has: {mine}); run horovodrun on a machine of that network"
        )
    description = f"hosts share {network} through {', '.join(n for n, _ in chosen)}; rendezvous on {address}"
    return JobNetwork(address, tuple(n for n, _ in chosen), description)
