"""The hosts an elastic job may use now: what discovery finds, minus the blacklisted ones.

A host is blacklisted when one of its workers fails (as in Horovod: a failing machine is taken out
of the job, and the job goes on elsewhere). Without ``--blacklist-cooldown-range`` it stays out;
with ``MIN MAX`` it is tried again after a cool-down that starts at MIN seconds and doubles with
each time the host is blacklisted again, up to MAX, with up to 10% random jitter so that hosts
blacklisted together do not all come back in the same second.

Hosts keep the order in which they were first seen (a host back from the blacklist counts as new):
rank 0 is on the oldest host, whose workers hold the committed state.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable

from horovod.common.plugin_api import elastic_protocol

HostUpdateResult = elastic_protocol.HostUpdateResult


@dataclasses.dataclass
class _Blacklisting:
    until: float  # monotonic time it may come back (inf: never)
    times: int  # how many times it was blacklisted


class HostManager:
    def __init__(
        self,
        cooldown_range: tuple[int, int] | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self._cooldown_range = cooldown_range
        self._clock = clock
        self._rng = rng or random.Random()
        self._discovered: dict[str, int] = {}
        self._current: dict[str, int] = {}  # available now: discovered, not blacklisted, in first-seen order
        self._blacklist: dict[str, _Blacklisting] = {}

    @property
    def current_hosts(self) -> dict[str, int]:
        """Host -> slots usable now, oldest host first."""
        return dict(self._current)

    def update(self, discovered: dict[str, int]) -> HostUpdateResult:
        """Takes discovery's latest answer; says whether usable hosts were added, removed, or both."""
        self._discovered = dict(discovered)
        return self._recompute()

    def blacklist(self, host: str) -> float:
        """Takes ``host`` out after a failure; returns the seconds until it may come back (inf: never)."""
        entry = self._blacklist.get(host) or _Blacklisting(0.0, 0)
        entry.times += 1
        if self._cooldown_range is None:
            delay = float("inf")
        else:
            low, high = self._cooldown_range
            delay = min(float(high), float(low) * 2 ** (entry.times - 1)) * (1.0 + 0.1 * self._rng.random())
            delay = min(delay, float(high))
        entry.until = self._clock() + delay
        self._blacklist[host] = entry
        self._recompute()
        return delay

    def is_blacklisted(self, host: str) -> bool:
        entry = self._blacklist.get(host)
        return entry is not None and self._clock() < entry.until

    def blacklisted_hosts(self) -> list[str]:
        return [h for h in self._blacklist if self.is_blacklisted(h)]

    def any_coming_back(self) -> bool:
        """Whether a blacklisted host will be usable again (its cool-down ends)."""
        return any(entry.until != float("inf") and self.is_blacklisted(h) for h, entry in self._blacklist.items())

    def _recompute(self) -> HostUpdateResult:
        usable = {h: s for h, s in self._discovered.items() if not self.is_blacklisted(h)}
        result = HostUpdateResult.no_update
        updated: dict[str, int] = {}
        for host, slots in self._current.items():  # the hosts that stay keep their place
            if host in usable:
                updated[host] = usable[host]
                if usable[host] < slots:
                    result |= HostUpdateResult.removed
                elif usable[host] > slots:
                    result |= HostUpdateResult.added
            else:
                result |= HostUpdateResult.removed
        for host, slots in usable.items():
            if host not in updated:
                updated[host] = slots
                result |= HostUpdateResult.added
        self._current = updated
        return result
