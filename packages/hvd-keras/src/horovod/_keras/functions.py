"""Horovod's Keras collectives on values of the backend Keras runs on (tensors, numpy arrays,
Python numbers), returning the backend's tensors."""

from __future__ import annotations

from typing import Any

from horovod._keras import frameworks
from horovod._keras.compression import Compression
from horovod.common.framework_api import Average, handle_average_backwards_compatibility


def allreduce(
    value: Any,
    name: str | None = None,
    average: bool | None = None,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    op: int | None = None,
    compression: Any = Compression.none,
) -> Any:
    """``value`` reduced over every rank (``op``, default Average); the same shape on every rank."""
    op = handle_average_backwards_compatibility(op, average, stacklevel=3)
    return frameworks.current().allreduce(value, name, op, prescale_factor, postscale_factor, compression)


def allgather(value: Any, name: str | None = None) -> Any:
    """Every rank's ``value`` concatenated along the first dimension (which may differ by rank)."""
    return frameworks.current().allgather(value, name)


def broadcast(value: Any, root_rank: int, name: str | None = None) -> Any:
    """``root_rank``'s ``value`` on every rank."""
    return frameworks.current().broadcast(value, root_rank, name)


def reducescatter(value: Any, name: str | None = None, op: int = Average) -> Any:
    """``value`` reduced over every rank, this rank's slice of the first dimension."""
    return frameworks.current().reducescatter(value, name, op)


def broadcast_global_variables(root_rank: int) -> None:
    """Keras 3 has no global variables (Horovod's version read them from a TensorFlow 1 session)."""
    raise RuntimeError(
        "hvd.broadcast_global_variables() needs TensorFlow 1's global variables, which Keras 3 does not have: "
        "pass hvd.callbacks.BroadcastGlobalVariablesCallback(root_rank) to model.fit, or broadcast "
        "model.variables yourself"
    )
