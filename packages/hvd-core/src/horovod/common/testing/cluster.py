"""Running N ranks as threads of one process, each with its own engine.

The engines connect through one in-memory store and, by default, the in-memory backend, so the
whole engine (negotiation, cache, fusion, execution) is exercised with N ranks without starting
processes. Each thread sees the ordinary ``horovod.common`` API: ``hvd.init()`` in a thread
initialises that thread's rank.
"""

from __future__ import annotations

import contextlib
import os
import threading
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from horovod.common import lifecycle, state
from horovod.common.world import Launch, Topology


def _topology(hosts: Sequence[str], rank: int) -> Topology:
    """Rank `rank`'s place among ranks on `hosts` (one entry per rank), as horovodrun numbers them:
    local ranks count the ranks before it on its host; the cross set holds each host's rank with
    that local rank, hosts in the order of their first rank."""
    local = [hosts[:r].count(hosts[r]) for r in range(len(hosts))]
    cross = [r for r in range(len(hosts)) if local[r] == local[rank]]
    return Topology(
        rank=rank,
        size=len(hosts),
        local_rank=local[rank],
        local_size=hosts.count(hosts[rank]),
        cross_rank=cross.index(rank),
        cross_size=len(cross),
    )


class ClusterError(AssertionError):
    """One or more ranks raised (or did not finish); the message has every rank's traceback."""

    def __init__(self, failures: Mapping[int, str]) -> None:
        self.failures = dict(failures)
        text = "\n".join(f"--- rank {rank} ---\n{tb}" for rank, tb in sorted(self.failures.items()))
        super().__init__(f"{len(self.failures)} rank(s) failed:\n{text}")


def run_cluster(
    fn: Callable[..., Any],
    np: int,
    *,
    args: Sequence[Any] = (),
    env: Mapping[str, str] | None = None,
    backend: str = "inmemory",
    timeout: float = 60.0,
    hosts: Sequence[str] | None = None,
) -> list[Any]:
    """Runs ``fn(*args)`` on ``np`` ranks (threads) and returns their results in rank order.

    ``env`` adds ``HOROVOD_*`` settings for these ranks only. A rank that is still running after
    ``timeout`` seconds fails the run (its engine is shut down so its thread can finish).
    ``hosts`` names the host of each rank (``HOROVOD_HOSTNAME``, and local and cross ranks as a
    launcher gives them): by default all of them are on one.
    """
    from horovod.common import _core

    store = _core.InMemoryStore()
    merged_env = {**os.environ, **(env or {}), "HOROVOD_CPU_OPERATIONS": backend}
    job_key = f"cluster-{uuid.uuid4().hex[:8]}"
    results: list[Any] = [None] * np
    failures: dict[int, str] = {}

    # shutdown() stops every rank's engine (Horovod's semantics), so a rank that returns waits for
    # the others before shutting down: otherwise it could stop a peer still finishing its function.
    # A rank that fails shuts down at once, which releases peers waiting on it in a collective.
    finished = threading.Barrier(np)

    placed = list(hosts) if hosts is not None else ["localhost"] * np
    if len(placed) != np:
        raise ValueError(f"run_cluster: {len(placed)} hosts given for {np} ranks")

    def rank_main(rank: int) -> None:
        topology = _topology(placed, rank)
        rank_env = merged_env if hosts is None else {**merged_env, "HOROVOD_HOSTNAME": placed[rank]}
        state.set_thread_launch(Launch(topology=topology, env=rank_env, store=store, job_key=job_key))
        try:
            results[rank] = fn(*args)
        except BaseException:
            failures[rank] = traceback.format_exc()
            lifecycle.shutdown()
        finally:
            with contextlib.suppress(threading.BrokenBarrierError):  # a peer failed: shut down anyway
                finished.wait(timeout)
            lifecycle.shutdown()
            state.set_thread_launch(None)

    threads = [threading.Thread(target=rank_main, args=(r,), name=f"hvd-rank-{r}", daemon=True) for r in range(np)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    stuck = [r for r, t in enumerate(threads) if t.is_alive()]
    for r in stuck:
        failures[r] = f"rank {r} did not finish within {timeout} s"
    if failures:
        raise ClusterError(failures)
    return results
