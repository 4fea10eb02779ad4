"""Elastic training for Keras 3 (Horovod's ``hvd.elastic``): the one implementation behind
``horovod.keras.elastic`` and ``horovod.tensorflow.keras.elastic``.

``KerasState`` keeps a model and its optimizer (hvd-tensorflow's ``TensorFlowKerasState``, which
needs no TensorFlow, broadcasting through Keras's own helper so that it serves every backend);
the callbacks commit the state and keep its ``batch`` and ``epoch`` as ``model.fit`` goes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from horovod._keras.elastic.callbacks import CommitStateCallback, UpdateBatchStateCallback, UpdateEpochStateCallback
from horovod._keras.elastic.state import KerasState
from horovod.common.elastic import ObjectState, State, run_fn
from horovod.tensorflow.elastic.errors import raising_horovod_errors

_R = TypeVar("_R")


def _reset() -> None:
    from horovod.common.framework_api import init, shutdown

    shutdown()
    init()


def run(func: Callable[..., _R]) -> Callable[..., _R]:
    """Decorator: runs ``func(state, *args, **kwargs)`` so that it survives workers coming and going.

    Before each try the state is synchronised from rank 0; a lost peer (``HorovodInternalError``)
    restores the last commit, a change of hosts (``HostsUpdatedInterrupt``) keeps the state; then
    Horovod is re-initialised for the new world, in this same process, and ``func`` runs again.
    A peer lost inside ``model.fit``'s compiled step on TensorFlow (an ``AbortedError`` from one of
    hvd-tensorflow's kernels) counts as ``HorovodInternalError``. Collectives must not be the call
    to ``func`` itself (new workers would run them while the others synchronise).
    """
    return run_fn(raising_horovod_errors(func), _reset)


__all__ = [
    "CommitStateCallback",
    "KerasState",
    "ObjectState",
    "State",
    "UpdateBatchStateCallback",
    "UpdateEpochStateCallback",
    "run",
    "run_fn",
]
