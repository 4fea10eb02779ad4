"""Arbitrary Python objects between ranks: broadcast_object and allgather_object."""

from __future__ import annotations

from typing import Any

import cloudpickle

import torch
from horovod.common import framework_api as api
from horovod.common.framework_api import ProcessSet, global_process_set
from horovod.torch.mpi_ops import allgather_async, broadcast_, synchronize


def _serialize(obj: Any) -> torch.Tensor:
    return torch.frombuffer(bytearray(cloudpickle.dumps(obj)), dtype=torch.uint8)


def _deserialize(data: torch.Tensor) -> Any:
    return cloudpickle.loads(data.numpy().tobytes())


def broadcast_object(
    obj: Any, root_rank: int = 0, name: str | None = None, process_set: ProcessSet = global_process_set
) -> Any:
    """Returns ``root_rank``'s ``obj`` on every rank (serialised with cloudpickle).

    The root gets its own object back; the others a copy. ``obj`` is ignored on the other ranks.
    """
    base = name or api.auto_name("broadcast_object")
    is_root = api.set_rank(process_set) == root_rank
    data = _serialize(obj) if is_root else None
    size = torch.tensor([data.numel() if data is not None else 0], dtype=torch.int64)
    broadcast_(size, root_rank, f"{base}.size", process_set)
    if data is None:
        data = torch.empty(int(size[0]), dtype=torch.uint8)
    broadcast_(data, root_rank, f"{base}.data", process_set)
    return obj if is_root else _deserialize(data)


def allgather_object(obj: Any, name: str | None = None, process_set: ProcessSet = global_process_set) -> list[Any]:
    """Returns the list of every rank's ``obj`` (in rank order), serialised with cloudpickle."""
    base = name or api.auto_name("allgather_object")
    data = _serialize(obj)
    sizes_handle = allgather_async(torch.tensor([data.numel()], dtype=torch.int64), f"{base}.sizes", process_set)
    data_handle = allgather_async(data, f"{base}.data", process_set)
    sizes = synchronize(sizes_handle).tolist()
    gathered = synchronize(data_handle)
    objects, start = [], 0
    for size in sizes:
        objects.append(_deserialize(gathered[start : start + size]))
        start += size
    return objects
