"""Handles of horovod.torch's asynchronous operations.

Horovod's torch API has one integer handle per call, also for calls that are several engine
operations (a grouped allreduce, a sparse allreduce); ``synchronize`` returns the call's result in
Horovod's form. The handles are horovod.common's: several operations are combined into one there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from horovod.common.framework_api import combine, poll, synchronize

__all__ = ["poll", "register", "single", "synchronize"]


def register(parts: Sequence[int], finish: Callable[[list[Any]], Any]) -> int:
    """A handle for the engine operations ``parts``, whose results ``finish`` turns into one result."""
    return combine(parts, finish)


def single(part: int, finish: Callable[[Any], Any] | None = None) -> int:
    """A handle for one engine operation (its result passed through ``finish`` if given)."""
    if finish is None:
        return part
    return combine([part], lambda results: finish(results[0]))
