"""Process sets: collectives among a subset of ranks (Horovod's ProcessSet API)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from horovod.common import state


class ProcessSet:
    """A subset of ranks with its own communicator, negotiation and cache.

    Create it with a list of ranks, then either pass it to ``hvd.init(process_sets=[...])`` or
    register it with ``hvd.add_process_set`` (dynamic process sets). ``process_set_id`` is None
    until it is registered.

    :param ranks_or_comm: the set's members: a list (tuple, range) of distinct global ranks, or an mpi4py communicator,
        whose members are found when ``init`` forms the world. ``ValueError`` for ranks that are not distinct integers.
    """

    def __init__(self, ranks_or_comm: Sequence[int] | Any) -> None:
        #: The MPI communicator the set was made from (Horovod's attribute); None for a list of ranks.
        self.mpi_comm: Any = None
        self.process_set_id: int | None = None
        self.ranks: list[int] = []
        if not isinstance(ranks_or_comm, (list, tuple, range)) and hasattr(ranks_or_comm, "Get_group"):
            # An mpi4py communicator (Horovod's ProcessSet(comm)): its members' ranks in the world
            # are known once init() forms that world (lifecycle.register_comm_sets).
            self.mpi_comm = ranks_or_comm
            return
        ranks = list(ranks_or_comm)
        if any(not isinstance(r, int) or isinstance(r, bool) for r in ranks):
            raise ValueError(f"process set ranks must be integers, got {ranks!r}")
        if len(set(ranks)) != len(ranks):
            raise ValueError(f"process set ranks must be distinct, got {ranks!r}")
        self.ranks = sorted(ranks)

    def _context_engine(self) -> Any | None:
        if self.process_set_id is None or not state.is_initialized():
            return None
        return state.context().engine

    def size(self) -> int | None:
        """Number of ranks in the set, or None if it is not registered."""
        engine = self._context_engine()
        if engine is None:
            return None
        size = engine.process_set_size(self.process_set_id)
        return None if size < 0 else size

    def rank(self) -> int | None:
        """This process's rank within the set, or None if it is not a member (or not registered)."""
        engine = self._context_engine()
        if engine is None:
            return None
        rank = engine.process_set_rank(self.process_set_id)
        return None if rank < 0 else rank

    def included(self) -> bool | None:
        """Whether this process belongs to the set (None if it is not registered)."""
        if self._context_engine() is None:
            return None
        return self.rank() is not None

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ProcessSet) and other.ranks == self.ranks and other.process_set_id == self.process_set_id
        )

    def __hash__(self) -> int:
        return hash((tuple(self.ranks), self.process_set_id))

    def __repr__(self) -> str:
        if self.mpi_comm is not None and self.process_set_id is None:
            return f"ProcessSet(mpi_comm={self.mpi_comm!r}, not registered)"
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"


class _GlobalProcessSet(ProcessSet):
    """All ranks; id 0. Its ranks follow whatever world init() created."""

    def __init__(self) -> None:
        super().__init__([])
        self.process_set_id = 0

    @property
    def ranks(self) -> list[int]:
        return list(range(state.topology().size)) if state.is_initialized() else []

    @ranks.setter
    def ranks(self, value: list[int]) -> None:  # the base class assigns it once; ignored
        pass

    def __repr__(self) -> str:
        return "ProcessSet(process_set_id=0, ranks=<all>)"


global_process_set: ProcessSet = _GlobalProcessSet()


def process_set_id(process_set: ProcessSet) -> int:
    """The engine's id of a registered process set; ``ValueError`` when it is not registered.

    :param process_set: the process set.
    """
    if process_set.process_set_id is None:
        raise ValueError(
            f"{process_set!r} is not registered: pass it to hvd.init(process_sets=...) or hvd.add_process_set()"
        )
    return process_set.process_set_id


def add_process_set(process_set: ProcessSet | Sequence[int]) -> ProcessSet:
    """Registers a process set on every rank (collective; needs HOROVOD_DYNAMIC_PROCESS_SETS=1).

    :param process_set: a :class:`ProcessSet` not yet registered, or a list of global ranks to make one from. Every rank
        calls it with the same ranks.
    :raises ValueError: when the set is already registered, or was made from an MPI communicator (those are registered
        by ``init``).
    """
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    if ps.process_set_id is not None:
        raise ValueError(f"{ps!r} is already registered")
    if ps.mpi_comm is not None:
        raise ValueError("a ProcessSet made from an MPI communicator is registered by hvd.init(process_sets=[...])")
    engine = state.context().engine
    handle = engine.add_process_set(ps.ranks)
    handle.wait()
    ps.process_set_id = handle.value
    return ps


def remove_process_set(process_set: ProcessSet) -> bool:
    """Removes a dynamic process set on every rank (collective). Returns False if it was not registered.

    :param process_set: a process set ``add_process_set`` registered (the global set is never removed).
    """
    if process_set.process_set_id is None or process_set.process_set_id == 0:
        return False
    engine = state.context().engine
    handle = engine.remove_process_set(process_set.process_set_id)
    handle.wait()
    process_set.process_set_id = None
    return True
