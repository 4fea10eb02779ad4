"""Handles of horovod.torch's asynchronous operations.

Horovod's torch API has one integer handle per call, also for calls that are several engine
operations (a grouped allreduce, a sparse allreduce); ``synchronize`` returns the call's result in
Horovod's form. Handles belong to the running Horovod instance (one per rank: the test kit runs
ranks as threads of one process), so they are kept beside it.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any, Callable, Sequence

from horovod.common import basics, collectives


class _Pending:
    __slots__ = ("parts", "finish")

    def __init__(self, parts: Sequence[int], finish: Callable[[list], Any]) -> None:
        self.parts = list(parts)  # horovod.common handles
        self.finish = finish  # their results (in order) -> this call's result


class _Registry:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.next = itertools.count(1)
        self.pending: dict[int, _Pending] = {}


# One registry per initialised Horovod instance; it goes away with the instance.
_registries: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_registries_lock = threading.Lock()


def _registry() -> _Registry:
    ctx = basics.context()  # raises Horovod's "not initialized" error
    with _registries_lock:
        registry = _registries.get(ctx)
        if registry is None:
            registry = _registries[ctx] = _Registry()
    return registry


def register(parts: Sequence[int], finish: Callable[[list], Any]) -> int:
    """A handle for the engine operations ``parts``, whose results ``finish`` turns into one result."""
    registry = _registry()
    with registry.lock:
        handle = next(registry.next)
        registry.pending[handle] = _Pending(parts, finish)
    return handle


def single(part: int, finish: Callable[[Any], Any] | None = None) -> int:
    """A handle for one engine operation (its result passed through ``finish`` if given)."""
    return register([part], (lambda results: results[0]) if finish is None else (lambda results: finish(results[0])))


def _lookup(handle: int, pop: bool) -> _Pending:
    registry = _registry()
    with registry.lock:
        pending = registry.pending.pop(handle, None) if pop else registry.pending.get(handle)
    if pending is None:
        raise ValueError(f"handle {handle!r} is unknown or was already synchronized")
    return pending


def poll(handle: int) -> bool:
    """True when the operation behind ``handle`` has completed; never blocks."""
    return all(collectives.poll(part) for part in _lookup(handle, pop=False).parts)


def synchronize(handle: int) -> Any:
    """Waits for the operation behind ``handle`` and returns its result (raises its error)."""
    pending = _lookup(handle, pop=True)
    results, error = [], None
    for part in pending.parts:  # wait for every part, even after one failed, so none is left behind
        try:
            results.append(collectives.synchronize(part))
        except BaseException as e:  # noqa: BLE001 - re-raised below
            error = error or e
    if error is not None:
        raise error
    return pending.finish(results)
