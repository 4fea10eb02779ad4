"""Intra-op threads per rank: each host's cores shared among the ranks on it.

Frameworks size their intra-op thread pools by the machine's cores, as if their process had it to
itself. With several ranks on a host each takes every core, and they fight over them: two ranks of
torch's default on 2 cores trained 35% slower than with one thread each. horovodrun (as torchrun
does) gives each rank the host's cores divided by its ranks there, at least 1, in the variables the
frameworks read when they start, unless the user set them; ``--num-threads-per-rank N``
(``HOROVOD_NUM_THREADS_PER_RANK``) sets N for every rank instead, and 0 leaves them alone.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from horovod.runner.errors import UsageError

SETTING = "HOROVOD_NUM_THREADS_PER_RANK"
#: The ranks the launcher starts on a rank's host, for an elastic worker: its HOROVOD_LOCAL_SIZE
#: comes only at rendezvous, after the frameworks have sized their thread pools.
HOST_RANKS = "HOROVOD_RUNNER_HOST_RANKS"
#: What torch (OpenMP, and MKL's BLAS), TensorFlow and MXNet read for their intra-op threads.
VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "MXNET_OMP_MAX_THREADS")
AUTO = "auto"


def host_cores() -> int:
    """The cores this process may run on (its affinity, which a container or taskset narrows)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def requested(env: Mapping[str, str]) -> int | None:
    """The threads per rank asked for: None for the default (the host's share), 0 to leave alone."""
    raw = env.get(SETTING, "").strip().lower()
    if raw in ("", AUTO):
        return None
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise UsageError(f"{SETTING}={raw!r} (--num-threads-per-rank) must be a number of threads, or 0 to leave them")
    return value


def share(cores: int, local_size: int) -> int:
    return max(1, cores // max(1, local_size))


def apply(env: Mapping[str, str], cores: int) -> dict[str, str]:
    """``env`` of a rank (its ``HOROVOD_RUNNER_HOST_RANKS`` or ``HOROVOD_LOCAL_SIZE`` given) with the
    thread variables set as asked: by default, the host's cores over its ranks."""
    local_size = env.get(HOST_RANKS) or env.get("HOROVOD_LOCAL_SIZE") or "1"
    return with_default(env, share(cores, int(local_size)))


def with_default(env: Mapping[str, str], default: int) -> dict[str, str]:
    """``env`` with the thread variables set as asked, ``default`` threads where the user set none."""
    out = dict(env)
    asked = requested(env)
    if asked == 0:
        return out
    threads = asked if asked is not None else default
    for name in VARIABLES:
        if asked is not None or not out.get(name, "").strip():  # the default keeps what the user set
            out[name] = str(threads)
    return out


def host_shares(local_sizes: Mapping[str, int], cores_here: int, remote: bool) -> str:
    """What the default gives the ranks of this machine's hosts, for :func:`describe`."""
    here = [f"{host}: {cores_here} cores / {n} ranks = {share(cores_here, n)}" for host, n in local_sizes.items()]
    return "; ".join(here) + ("; each remote host likewise, with its own cores" if remote else "")


def describe(env: Mapping[str, str], default: str) -> str | None:
    """The one line a launcher prints about it, or None when nothing is set (all given, or 0);
    ``default`` says what the default gives each rank (e.g. :func:`host_shares`)."""
    asked = requested(env)
    if asked == 0 or (asked is None and all(env.get(name, "").strip() for name in VARIABLES)):
        return None
    names = ", ".join(VARIABLES)
    if asked is not None:
        return f"{asked} intra-op thread(s) per rank ({names}), from {SETTING} / --num-threads-per-rank"
    return (
        f"intra-op threads per rank ({names}, where not set) are {default}; "
        "--num-threads-per-rank N to choose, 0 to leave them alone"
    )
