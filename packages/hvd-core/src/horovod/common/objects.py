"""Arbitrary Python objects between ranks: broadcast_object and allgather_object.

Written once for every framework: objects are serialised with cloudpickle (closures and lambdas
too, as Horovod does) and travel as uint8 arrays through the numpy collectives.
"""

from __future__ import annotations

from typing import Any

import cloudpickle
import numpy as np

from horovod.common import state
from horovod.common.api_text import shared_parameters
from horovod.common.collectives import synchronize
from horovod.common.ops import allgather_async, broadcast_async
from horovod.common.process_sets import ProcessSet, global_process_set


def _serialize(obj: Any) -> np.ndarray:
    return np.frombuffer(cloudpickle.dumps(obj), dtype=np.uint8)


def _deserialize(data: np.ndarray) -> Any:
    return cloudpickle.loads(data.tobytes())


def _set_rank(process_set: ProcessSet) -> int:
    if not process_set.process_set_id:
        return state.topology().rank
    rank = process_set.rank()
    if rank is None:
        raise ValueError(f"rank {state.topology().rank} is not a member of {process_set!r}")
    return rank


@shared_parameters
def broadcast_object(
    obj: Any, root_rank: int = 0, name: str | None = None, process_set: ProcessSet = global_process_set
) -> Any:
    """Returns ``root_rank``'s ``obj`` on every rank (serialised with cloudpickle).

    The root gets its own object back; the others a copy. ``obj`` is ignored on the other ranks.

    :param obj: the object to send (any object cloudpickle can serialise); read on the root only.
    :param root_rank: the rank whose object is sent (default 0; a global rank, also on a process set).
    :param name: |shared|
    :param process_set: |shared|
    """
    base = name or state.context().auto_name("broadcast_object")
    _set_rank(process_set)  # says so if this rank is not a member
    is_root = state.topology().rank == root_rank  # a global rank, as Horovod's root_rank is
    data = _serialize(obj) if is_root else np.empty(0, dtype=np.uint8)
    size = synchronize(broadcast_async(np.array([data.size], dtype=np.int64), root_rank, f"{base}.size", process_set))
    if not is_root:
        data = np.empty(int(size[0]), dtype=np.uint8)
    received = synchronize(broadcast_async(data, root_rank, f"{base}.data", process_set))
    return obj if is_root else _deserialize(received)


@shared_parameters
def allgather_object(obj: Any, name: str | None = None, process_set: ProcessSet = global_process_set) -> list[Any]:
    """Returns the list of every rank's ``obj`` (in rank order), serialised with cloudpickle.

    :param obj: this rank's object (any object cloudpickle can serialise).
    :param name: |shared|
    :param process_set: |shared|
    """
    base = name or state.context().auto_name("allgather_object")
    data = _serialize(obj)
    sizes_handle = allgather_async(np.array([data.size], dtype=np.int64), f"{base}.sizes", process_set)
    data_handle = allgather_async(data, f"{base}.data", process_set)
    sizes = synchronize(sizes_handle).tolist()
    gathered = synchronize(data_handle)
    objects, start = [], 0
    for size in sizes:
        objects.append(_deserialize(gathered[start : start + size]))
        start += size
    return objects
