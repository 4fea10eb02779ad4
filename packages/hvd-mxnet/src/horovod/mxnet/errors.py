"""hvd's errors as MXNet errors, for the collectives that raise at the call.

Collectives inside MXNet's engine (see :mod:`horovod.mxnet.engine`) fail as every MXNet operation
does: ``MXNetError`` when an output is read. Those that wait for their result before returning
(allgather, alltoall, join's peers...) raise at the call; they raise a class that is both the hvd
error (``HorovodInternalError``, ``CollectiveMismatchError``...: what elastic training and
Horovod scripts catch) and ``mxnet.base.MXNetError`` (what MXNet code catches), with its message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from horovod.mxnet.adapter import mx

__all__ = ["as_mxnet_error", "raising_mxnet_errors"]

_MIXED: dict[type[BaseException], type[BaseException]] = {}
T = TypeVar("T")


def as_mxnet_error(error: Exception) -> Exception:
    """``error`` as an instance of a class deriving from both its class and MXNetError."""
    if isinstance(error, mx.base.MXNetError):
        already: Exception = error
        return already
    cls = type(error)
    mixed = _MIXED.get(cls)
    if mixed is None:
        mixed = type(cls.__name__, (cls, mx.base.MXNetError), {"__module__": cls.__module__})
        _MIXED[cls] = mixed
    converted = mixed.__new__(mixed)
    converted.__dict__.update(getattr(error, "__dict__", {}))
    converted.args = error.args
    assert isinstance(converted, Exception)
    return converted


def raising_mxnet_errors(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call(*args, **kwargs)``, its hvd errors raised as MXNet errors (see the module doc)."""
    try:
        return call(*args, **kwargs)
    except (RuntimeError, ValueError) as error:
        if isinstance(error, mx.base.MXNetError) or not type(error).__module__.startswith("horovod."):
            raise
        raise as_mxnet_error(error) from error
