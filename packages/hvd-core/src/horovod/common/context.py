"""One initialised Horovod instance: the engine and what the Python API keeps beside it."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from typing import Any, Callable

from horovod.common.config import Topology


@dataclasses.dataclass
class _Pending:
    core: Any  # _core.Handle (or _Combined)
    keep_alive: tuple  # the caller's buffers, borrowed by the engine until completion
    finish: Callable[[Any], Any]  # turns the completed core handle into the caller's result


class _Combined:
    """Several operations behind one handle (a grouped call): done when all are done."""

    def __init__(self, parts: list[_Pending]) -> None:
        self.parts = parts

    def poll(self) -> bool:
        return all(p.core.poll() for p in self.parts)

    def wait(self) -> None:
        error = None
        for p in self.parts:  # wait for every part, even after one failed, so none is left running
            try:
                p.core.wait()
            except BaseException as e:  # noqa: BLE001 - re-raised below
                error = error or e
        if error is not None:
            raise error


class Context:
    """The state behind ``hvd.init()``; ``hvd.shutdown()`` ends it."""

    def __init__(self, engine: Any, topology: Topology, backend_name: str, job_topology: Topology) -> None:
        self.engine = engine
        #: This process's view of the (possibly sub-)world Horovod was initialised with.
        self.topology = topology
        #: The launcher's view of the whole job, before init(comm=[...]) narrowed it.
        self.job_topology = job_topology
        self.backend_name = backend_name
        self._lock = threading.Lock()
        self._handles: dict[int, _Pending] = {}
        self._next_handle = itertools.count(1)
        self._name_counters: dict[str, itertools.count] = {}

    # Unnamed collectives are numbered per kind, in program order: every rank must call them in the
    # same order (Horovod's requirement too).
    def auto_name(self, kind: str) -> str:
        with self._lock:
            counter = self._name_counters.setdefault(kind, itertools.count())
            return f"{kind}.noname.{next(counter)}"

    def submit(self, core: Any, keep_alive: tuple, finish: Callable[[Any], Any]) -> int:
        handle = next(self._next_handle)
        with self._lock:
            self._handles[handle] = _Pending(core, keep_alive, finish)
        return handle

    def combine(self, handles: list[int], finish: Callable[[list], Any]) -> int:
        """One handle for several: ``synchronize`` waits for all and returns ``finish(results)``."""
        with self._lock:
            parts = [self._handles.pop(h) for h in handles]
        combined = _Combined(parts)
        return self.submit(combined, (), lambda c: finish([p.finish(p.core) for p in c.parts]))

    def poll(self, handle: int) -> bool:
        return self._pending(handle).core.poll()

    def synchronize(self, handle: int) -> Any:
        pending = self._pending(handle)
        try:
            pending.core.wait()  # releases the GIL; raises the operation's error
        finally:
            with self._lock:
                self._handles.pop(handle, None)
        return pending.finish(pending.core)

    def _pending(self, handle: int) -> _Pending:
        with self._lock:
            pending = self._handles.get(handle)
        if pending is None:
            raise ValueError(f"handle {handle} is unknown or was already synchronized")
        return pending

    def shutdown(self) -> None:
        self.engine.shutdown()
