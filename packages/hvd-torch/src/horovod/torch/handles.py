"""Handles of horovod.torch's asynchronous operations.

Horovod's torch API has one integer handle per call, also for calls that are several engine
operations (a grouped allreduce, a sparse allreduce); ``synchronize`` returns the call's result in
Horovod's form. The handles are horovod.common's: several operations are combined into one there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from horovod.common.framework_api import combine, poll, synchronize

__all__ = ["CallableHandle", "poll", "register", "single", "synchronize"]


class CallableHandle(int):
    """A handle that is also called to wait for its result: ``handle()`` is ``synchronize(handle)``.

    Horovod's ``sparse_allreduce_async`` returns a function that code calls (its
    ``DistributedOptimizer`` tells the two kinds apart with ``callable(handle)``); being an int
    as well, this one also goes to ``poll`` and ``synchronize`` like every other handle.
    """

    __slots__ = ()

    def __call__(self) -> Any:
        return synchronize(self)

    def __repr__(self) -> str:
        return f"CallableHandle({int(self)})"


def register(parts: Sequence[int], finish: Callable[[list[Any]], Any]) -> int:
    """A handle for the engine operations ``parts``, whose results ``finish`` turns into one result."""
    return combine(parts, finish)


def single(part: int, finish: Callable[[Any], Any] | None = None) -> int:
    """A handle for one engine operation (its result passed through ``finish`` if given)."""
    if finish is None:
        return part
    return combine([part], lambda results: finish(results[0]))
