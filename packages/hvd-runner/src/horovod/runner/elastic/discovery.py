"""Where an elastic job may run: hosts and their slots, found by a script or fixed by -H.

A discovery script (``--host-discovery-script``) prints one host per line, ``host`` or
``host:slots`` (``--slots-per-host`` is the default number of slots); it is run again every second
or so, and its output is the whole current set of hosts. A script that fails, hangs or prints a
malformed line is an error that names it: the driver keeps the hosts it had and says why.
"""

from __future__ import annotations

import subprocess

from horovod.runner.errors import UsageError
from horovod.runner.hosts import parse_hosts

#: Seconds a discovery script may run before it counts as failed.
DISCOVERY_TIMEOUT_S = 30.0


class DiscoveryError(RuntimeError):
    """The discovery script failed, hung, or printed something that is not a host list."""


class HostDiscovery:
    """Finds the hosts available now (Horovod's interface)."""

    def find_available_hosts_and_slots(self) -> dict[str, int]:
        """Host name -> slots, in the order the hosts are listed."""
        raise NotImplementedError


class FixedHosts(HostDiscovery):
    """The hosts of -H / --hostfile, which never change."""

    def __init__(self, available_hosts_and_slots: dict[str, int]) -> None:
        self._hosts = dict(available_hosts_and_slots)

    def find_available_hosts_and_slots(self) -> dict[str, int]:
        return dict(self._hosts)


class HostDiscoveryScript(HostDiscovery):
    """Runs ``discovery_script`` (a path or a shell command) and parses its output."""

    def __init__(self, discovery_script: str, slots: int | None = None, timeout_s: float = DISCOVERY_TIMEOUT_S) -> None:
        self._script = discovery_script
        self._default_slots = slots
        self._timeout_s = timeout_s

    def find_available_hosts_and_slots(self) -> dict[str, int]:
        try:
            done = subprocess.run(
                self._script,
                shell=True,  # Horovod runs it through the shell too: a command line with arguments works
                capture_output=True,
                text=True,
                timeout=self._timeout_s,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise DiscoveryError(
                f"host discovery script {self._script!r} did not finish within {self._timeout_s:g} s"
            ) from None
        except OSError as error:
            raise DiscoveryError(f"cannot run host discovery script {self._script!r}: {error}") from None
        if done.returncode != 0:
            last = done.stderr.strip().splitlines()[-1:] or [""]
            raise DiscoveryError(
                f"host discovery script {self._script!r} exited with code {done.returncode}"
                + (f": {last[0]}" if last[0] else "")
            )
        return parse_discovery_output(done.stdout, self._default_slots, self._script)


def parse_discovery_output(text: str, default_slots: int | None, where: str = "discovery") -> dict[str, int]:
    """``host`` / ``host:slots`` lines (blank lines and ``#`` comments skipped) -> host -> slots."""
    entries = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if ":" not in line:
            if default_slots is None:
                raise DiscoveryError(
                    f"host discovery script {where!r} printed {line!r} without slots: print host:slots, "
                    "or give --slots-per-host"
                )
            line = f"{line}:{default_slots}"
        entries.append(line)
    if not entries:
        return {}
    try:
        hosts = parse_hosts(",".join(entries), where=f"host discovery script {where!r}")
    except UsageError as error:
        raise DiscoveryError(str(error)) from None
    return {h.name: h.slots for h in hosts}
