"""A lost peer inside a graph: TensorFlow's error, turned back into ``HorovodInternalError``.

Eagerly hvd's collectives raise ``HorovodInternalError`` themselves. Inside a ``tf.function`` (a
Keras train step) or a ``tf.compat.v1`` session, hvd's kernels fail with status ABORTED when
Horovod stopped or a peer was lost, and TensorFlow raises that as ``tf.errors.AbortedError`` naming
the kernel's node; ``hvd.elastic.run`` must see it as the lost peer it is, to restore the last
commit and go on in a new world, as Horovod's TensorFlow ``run`` does.

Imports no TensorFlow (hvd-keras uses it with Keras on any backend): an error can only be
TensorFlow's once TensorFlow is loaded.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from horovod.common.exceptions import HorovodInternalError

_R = TypeVar("_R")

#: The node of one of hvd's kernels (HvdAllreduce, HvdBroadcast_3, scope/HvdJoin...) in TensorFlow's message.
_HVD_NODE = re.compile(r"\{\{node (?:[^{}]*/)?Hvd[A-Z]\w*\}\}")


def is_lost_peer(error: BaseException) -> bool:
    """Whether ``error`` is TensorFlow's report of an hvd kernel aborted (Horovod stopped)."""
    tf = sys.modules.get("tensorflow")
    if tf is None or not isinstance(error, tf.errors.AbortedError):
        return False
    return _HVD_NODE.search(str(error.message)) is not None


def raising_horovod_errors(func: Callable[..., _R]) -> Callable[..., _R]:
    """``func``, raising ``HorovodInternalError`` where an hvd kernel aborted (see the module)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> _R:
        try:
            return func(*args, **kwargs)
        except Exception as error:
            if not is_lost_peer(error):
                raise
            # TensorFlow's message lists where the node was defined, then hvd's own message.
            message = str(getattr(error, "message", error))
            raise HorovodInternalError(message.rsplit("\n\n", 1)[-1].strip()) from error

    return wrapper
