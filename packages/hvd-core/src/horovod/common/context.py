"""One initialised Horovod instance: the engine and what the Python API keeps beside it."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, Protocol

from horovod.common.world import Topology

# A pending operation is a plain tuple (core handle, finish, kept, out), made once per tensor
# (hundreds per training step, so no per-operation object or closure): the engine borrows the
# memory of `kept` and `out` (the caller's tensors) until completion, so they are held here;
# synchronize returns finish(core, kept, out), or `out` itself when finish is None.
Finish = Callable[[Any, Any, Any], Any]


class Operation(Protocol):
    """What a pending tuple's core is: the engine's ``Handle``, or ``_Combined``."""

    def poll(self) -> bool: ...

    def wait(self) -> None: ...


Pending = tuple[Operation, Finish | None, Any, Any]


def _result(pending: Pending) -> Any:
    core, finish, kept, out = pending
    return out if finish is None else finish(core, kept, out)


class _Combined:
    """Several operations behind one handle (a grouped call): done when all are done."""

    def __init__(self, parts: list[Pending]) -> None:
        self.parts = parts

    def poll(self) -> bool:
        return all(p[0].poll() for p in self.parts)

    def wait(self) -> None:
        error = None
        for p in self.parts:  # wait for every part, even after one failed, so none is left running
            try:
                p[0].wait()
            except BaseException as e:
                if not p[0].poll():  # interrupted by a signal handler: the parts go on, the handle stays
                    raise
                error = error or e
        if error is not None:
            raise error


def _finish_combined(combined: _Combined, kept: Any, finish: Callable[[list[Any]], Any]) -> Any:
    return finish([_result(p) for p in combined.parts])


class Context:
    """The state behind ``hvd.init()``; ``hvd.shutdown()`` ends it."""

    def __init__(self, engine: Any, topology: Topology, backend_name: str, job_topology: Topology) -> None:
        self.engine = engine
        #: This process's view of the (possibly sub-)world Horovod was initialised with.
        self.topology = topology
        #: The launcher's view of the whole job, before init(comm=[...]) narrowed it.
        self.job_topology = job_topology
        self.backend_name = backend_name
        # No lock: several threads may submit and synchronize at once, and each step below is one
        # dict or itertools.count operation on int/str keys, which CPython performs atomically under
        # the GIL (no Python code runs inside them), so the table stays consistent and no handle
        # number is given twice. (A free-threaded build would need a lock here again.)
        self._handles: dict[int, Pending] = {}
        #: Rank 0's autotuner (horovod.common.autotune), when HOROVOD_AUTOTUNE is on.
        self.tuner: Any = None
        self._next_handle = itertools.count(1)
        self._name_counters: dict[str, itertools.count[int]] = {}

    # Unnamed collectives are numbered per kind, in program order: every rank must call them in the
    # same order (Horovod's requirement too).
    def auto_name(self, kind: str) -> str:
        counter = self._name_counters.setdefault(kind, itertools.count())
        return f"{kind}.noname.{next(counter)}"

    def submit(self, core: Operation, finish: Finish | None = None, kept: Any = None, out: Any = None) -> int:
        """A handle for the engine operation ``core``; see the pending tuple above."""
        handle = next(self._next_handle)
        self._handles[handle] = (core, finish, kept, out)
        return handle

    def combine(self, handles: list[int], finish: Callable[[list[Any]], Any]) -> int:
        """One handle for several: ``synchronize`` waits for all and returns ``finish(results)``."""
        parts = [self._handles.pop(h) for h in handles]  # each part's tuple keeps its own buffers
        return self.submit(_Combined(parts), _finish_combined, None, finish)  # finish rides in `out`

    def poll(self, handle: int) -> bool:
        return self._pending(handle)[0].poll()

    def synchronize(self, handle: int) -> Any:
        core, finish, kept, out = self._pending(handle)
        try:
            core.wait()  # raises the operation's error (waits without the GIL if not done yet)
        except BaseException:
            # Interrupted (a signal handler raised, as Ctrl-C does) the operation is still running,
            # on this tuple's buffers: the handle stays, to be synchronized again.
            if core.poll():
                self._handles.pop(handle, None)
            raise
        self._handles.pop(handle, None)
        return out if finish is None else finish(core, kept, out)  # _result, inlined: once per tensor

    def _pending(self, handle: int) -> Pending:
        pending = self._handles.get(handle)
        if pending is None:
            raise ValueError(f"handle {handle} is unknown or was already synchronized")
        return pending

    def shutdown(self) -> None:
        if self.tuner is not None:  # first: a search cut short writes its best row
            self.tuner.stop()
            self.tuner = None
        self.engine.shutdown()
