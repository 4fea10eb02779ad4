"""From horovodrun's flags to an elastic job: where to find hosts, how many workers, what deadlines."""

from __future__ import annotations

import argparse
import dataclasses
import os

from horovod.common.plugin_api import elastic_protocol
from horovod.runner import hosts
from horovod.runner import settings as settings_mod
from horovod.runner.elastic.discovery import FixedHosts, HostDiscovery, HostDiscoveryScript
from horovod.runner.elastic.driver import DriverSettings
from horovod.runner.errors import UsageError


@dataclasses.dataclass(frozen=True)
class ElasticSettings:
    """Everything an elastic job needs (Horovod's ``ElasticSettings``, with the job's own settings)."""

    discovery: HostDiscovery
    driver: DriverSettings
    #: The job as first discovered (environment, ssh, output...): its placements are every slot of
    #: the hosts found at start, from which the network is chosen.
    job: settings_mod.JobSettings
    cooldown_range: tuple[int, int] | None = None

    # Horovod's attribute names.
    @property
    def min_np(self) -> int:
        return self.driver.min_np

    @property
    def max_np(self) -> int | None:
        return self.driver.max_np

    @property
    def elastic_timeout(self) -> float:
        return self.driver.elastic_timeout_s

    @property
    def reset_limit(self) -> int | None:
        return self.driver.reset_limit


def from_namespace(ns: argparse.Namespace, environ: dict[str, str] | None = None) -> ElasticSettings:
    """Checks the elastic flags (config file applied) and describes the job; raises UsageError."""
    environ = dict(os.environ if environ is None else environ)
    settings_mod.refuse_unsupported(ns, environ, elastic=True)
    min_np = ns.min_num_proc if ns.min_num_proc is not None else ns.num_proc
    if min_np is None:
        raise UsageError("an elastic job needs --min-np (or -np, the number of workers to start with)")
    max_np = ns.max_num_proc
    initial = ns.num_proc if ns.num_proc is not None else min_np
    if max_np is not None and not min_np <= initial <= max_np:
        raise UsageError(f"--min-np {min_np} <= -np {initial} <= --max-np {max_np} does not hold")
    if initial < min_np:
        raise UsageError(f"-np {initial} is below --min-np {min_np}")
    cooldown = (int(ns.cooldown_range[0]), int(ns.cooldown_range[1])) if ns.cooldown_range is not None else None
    if cooldown is not None and cooldown[0] > cooldown[1]:
        raise UsageError(f"--blacklist-cooldown-range {cooldown[0]} {cooldown[1]}: MIN must not exceed MAX")
    timeout = ns.elastic_timeout
    if timeout is None:
        try:
            timeout = elastic_protocol.elastic_timeout_s(environ)
        except ValueError as error:
            raise UsageError(str(error)) from None

    discovery: HostDiscovery
    if ns.host_discovery_script is not None:
        if ns.hosts is not None or ns.hostfile is not None:
            raise UsageError("give either --host-discovery-script or -H/--hostfile, not both")
        discovery = HostDiscoveryScript(ns.host_discovery_script, ns.slots)
        try:
            first = discovery.find_available_hosts_and_slots()
        except RuntimeError as error:
            raise UsageError(str(error)) from None
    else:
        if ns.hosts is not None:
            host_list = hosts.parse_hosts(ns.hosts)
        elif ns.hostfile is not None:
            host_list = hosts.parse_hostfile(ns.hostfile)
        else:
            host_list = [hosts.Host("localhost", max_np or initial)]
        first = {h.name: h.slots for h in host_list}
        discovery = FixedHosts(first)
    placements = hosts.place_ranks([hosts.Host(h, s) for h, s in first.items()], sum(first.values()))
    job = settings_mod.job_settings(ns, environ, placements)
    driver = DriverSettings(
        min_np=min_np,
        max_np=max_np,
        initial_np=initial,
        elastic_timeout_s=float(timeout),
        reset_limit=ns.reset_limit,
    )
    return ElasticSettings(discovery, driver, job, cooldown)
