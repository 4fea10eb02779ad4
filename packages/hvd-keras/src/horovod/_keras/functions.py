"""Horovod's Keras collectives on values of the backend Keras runs on (tensors, numpy arrays,
Python numbers), returning the backend's tensors."""

from __future__ import annotations

from typing import Any

from horovod._keras import frameworks
from horovod._keras.compression import Compression
from horovod.common.framework_api import Average, handle_average_backwards_compatibility, shared_parameters


@shared_parameters
def allreduce(
    value: Any,
    name: str | None = None,
    average: bool | None = None,
    prescale_factor: float = 1.0,
    postscale_factor: float = 1.0,
    op: int | None = None,
    compression: Any = Compression.none,
) -> Any:
    """``value`` reduced over every rank (``op``, default Average); the same shape on every rank.

    :param value: a tensor of the active Keras backend (or a numpy array), the same shape and dtype on every rank.
    :param name: |shared|
    :param average: |shared|
    :param prescale_factor: |shared|
    :param postscale_factor: |shared|
    :param op: the reduction: ``Average`` (the default, when ``None``), ``Sum``, ``Min``, ``Max`` or ``Product``.
    :param compression: compresses the value for the wire and decompresses the result, e.g. ``Compression.fp16``
        (default ``Compression.none``).
    """
    op = handle_average_backwards_compatibility(op, average, stacklevel=3)
    return frameworks.current().allreduce(value, name, op, prescale_factor, postscale_factor, compression)


@shared_parameters
def allgather(value: Any, name: str | None = None) -> Any:
    """Every rank's ``value`` concatenated along the first dimension (which may differ by rank).

    :param value: a tensor of the active Keras backend (or a numpy array); its first dimension may differ between ranks.
    :param name: |shared|
    """
    return frameworks.current().allgather(value, name)


@shared_parameters
def broadcast(value: Any, root_rank: int, name: str | None = None) -> Any:
    """``root_rank``'s ``value`` on every rank.

    :param value: the root's value is sent; on the other ranks it gives the shape and dtype.
    :param root_rank: the rank whose value every rank gets.
    :param name: |shared|
    """
    return frameworks.current().broadcast(value, root_rank, name)


@shared_parameters
def reducescatter(value: Any, name: str | None = None, op: int = Average) -> Any:
    """``value`` reduced over every rank, this rank's slice of the first dimension.

    :param value: a tensor of the active Keras backend (or a numpy array), the same shape and dtype on every rank. Its
        first dimension is scattered.
    :param name: |shared|
    :param op: the reduction: ``Average`` (the default) or ``Sum``.
    """
    return frameworks.current().reducescatter(value, name, op)


def broadcast_global_variables(root_rank: int) -> None:
    """Keras 3 has no global variables (Horovod's version read them from a TensorFlow 1 session).

    :param root_rank: the rank whose variables would be sent.
    :raises RuntimeError: always: use ``callbacks.BroadcastGlobalVariablesCallback`` or broadcast ``model.variables``.
    """
    raise RuntimeError(
        "hvd.broadcast_global_variables() needs TensorFlow 1's global variables, which Keras 3 does not have: "
        "pass hvd.callbacks.BroadcastGlobalVariablesCallback(root_rank) to model.fit, or broadcast "
        "model.variables yourself"
    )
