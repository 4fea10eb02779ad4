"""Process sets made from communicators (Horovod's ``ProcessSet(mpi_comm)``), registered by ``init()``.

hvd-core does not know MPI: a plugin translates each communicator into the ranks of its members in
the world ``init()`` formed (the ``hvd_process_set_ranks`` hook). Ranks may hold different sets
(Horovod's example splits COMM_WORLD by parity: the even ranks pass the even communicator, the odd
ranks the odd one), but every rank must register every set, in one order: so the ranks exchange
their sets, and register their union, sorted, as process sets after the static ones. Each
``ProcessSet`` then gets the id of the set with its members.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from horovod.common.process_sets import ProcessSet


def register(
    plugins: Any, engine: Any, sets: Sequence[ProcessSet], world: Any, backend: str, listed: Sequence[ProcessSet]
) -> None:
    """Registers ``sets`` (made from communicators) on every rank; collective over the world (every
    rank calls it, with or without such sets). A set no plugin understands fails on every rank."""
    from horovod.common.objects import allgather_object

    mine: list[list[int]] | str
    try:
        mine = [_ranks(plugins, ps, world, backend) for ps in sets]
    except ValueError as error:
        mine = str(error)  # told to every rank below, so that none waits for this one
    everyone = allgather_object(mine, name="__hvd.process_sets.from_comms")
    failed = [(rank, why) for rank, why in enumerate(everyone) if isinstance(why, str)]
    if failed:
        raise ValueError("; ".join(f"rank {rank}: {why}" for rank, why in failed))
    assert not isinstance(mine, str)
    ids = {tuple(ps.ranks): ps.process_set_id for ps in listed}
    for members in sorted({tuple(r) for lists in everyone for r in lists}):
        if members not in ids:
            handle = engine.add_process_set(list(members))
            handle.wait()
            ids[members] = handle.value
    for ps, ranks in zip(sets, mine, strict=True):
        ps.ranks = ranks
        ps.process_set_id = ids[tuple(ranks)]


def _ranks(plugins: Any, ps: ProcessSet, world: Any, backend: str) -> list[int]:
    ranks = plugins.process_set_ranks(ps.mpi_comm, world, backend)
    if ranks is None:
        raise ValueError(
            f"ProcessSet(<{type(ps.mpi_comm).__name__}>): no installed plugin understands it (an mpi4py "
            "communicator needs the MPI backend: pip install hvd-backend-mpi, in a job started by mpirun)"
        )
    return sorted(ranks)
