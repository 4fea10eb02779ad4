"""The plain data that describes where a process sits: its job's topology and how it connects.

These types are part of the plugin contract (:mod:`horovod.common.plugin_api`): launcher and
backend plugins build and read them. They import nothing, so any module may use them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class Topology:
    """Where this process sits in the job, as the launcher (or the test kit) describes it.

    :param rank: this process's rank in the job, from 0 to ``size - 1``.
    :param size: the number of processes in the job.
    :param local_rank: this process's rank among the job's processes on its host.
    :param local_size: the number of the job's processes on this process's host.
    :param cross_rank: this process's rank among the job's processes that have its ``local_rank``
        (the rank of its host, when every host runs as many processes).
    :param cross_size: the number of the job's processes that have this process's ``local_rank``
        (the number of hosts, when every host runs as many processes).
    """

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1
    cross_rank: int = 0
    cross_size: int = 1


@dataclasses.dataclass(frozen=True)
class Launch:
    """How init() connects: the topology, the knobs, and (in tests) a shared in-process store."""

    topology: Topology
    env: Mapping[str, str]
    #: A ready store object for the engine (test kit), or None to let init() choose.
    store: Any = None
    #: A key prefix unique to this job; init() appends the initialisation count.
    job_key: str = "job"
    #: The backend that connects this job when a plugin described it (:class:`ExternalWorld`);
    #: None for horovodrun's jobs and the test kit's.
    backend: str | None = None
    #: The generation of an elastic job's world this launch joins (its store keys are fresh for each
    #: generation, so they are not numbered by this process's own count of init() calls, which
    #: differs between the world's workers); None outside elastic jobs.
    generation: int | None = None


@dataclasses.dataclass(frozen=True)
class ExternalWorld:
    """A job, or a world inside one, that a plugin describes because horovodrun did not start it:
    the ranks of ``mpirun -np 4 python train.py``, or the members of an mpi4py communicator given to
    ``init(comm=...)``. Answer of the hooks ``hvd_external_launch`` and ``hvd_init_world``.

    :param topology: this process's place in the job or world.
    :param backend: the name of the backend (a :class:`~horovod.common.plugin_api.BackendSpec`'s
        ``name``) that must connect it. It connects its ranks by itself: the engine hands it an
        in-memory store, since no rendezvous server exists.
    :param name: what tells this world from other worlds of the same job in store keys (for a
        backend that keys its set-up by them); ``""`` when the backend needs no store.

    .. versionadded:: 0.2
    """

    #: This process's place in the job or world.
    topology: Topology
    #: The backend that must connect it. It connects its ranks by itself: the engine hands it an
    #: in-memory store, since no rendezvous server exists.
    backend: str
    #: Tells this world from other worlds of the same job in store keys (for a backend that keys its
    #: set-up by them); "" when the backend needs no store.
    name: str = ""
