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
) -> list[Any]:
    """Runs ``fn(*args)`` on ``np`` ranks (threads) and returns their results in rank order.

    ``env`` adds ``HOROVOD_*`` settings for these ranks only. A rank that is still running after
    ``timeout`` seconds fails the run (its engine is shut down so its thread can finish).
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

    def rank_main(rank: int) -> None:
        topology = Topology(rank=rank, size=np, local_rank=rank, local_size=np, cross_rank=0, cross_size=1)
        state.set_thread_launch(Launch(topology=topology, env=merged_env, store=store, job_key=job_key))
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
