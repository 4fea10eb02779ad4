"""``horovod.tensorflow.elastic``: elastic training for TensorFlow (Horovod's API).

``run`` (the decorator), ``TensorFlowState`` (a list of variables), ``TensorFlowKerasState`` (a
Keras model and its optimizer), and hvd-core's ``State`` and ``ObjectState``. Run the script with
``horovodrun --min-np/--max-np`` (and ``--host-discovery-script`` or ``-H``).

The states load on first use, as the package's other names do: hvd-keras builds its ``KerasState``
on ``horovod.tensorflow.elastic.keras_state``, which imports no TensorFlow, so that it serves
Keras on torch too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from horovod.common.elastic import ObjectState, State, run_fn
from horovod.common.elastic import run as common_run
from horovod.common.plugin_api import lazy_exports
from horovod.tensorflow.elastic.errors import raising_horovod_errors

if TYPE_CHECKING:
    from horovod.tensorflow.elastic.keras_state import TensorFlowKerasState as TensorFlowKerasState
    from horovod.tensorflow.elastic.state import TensorFlowState as TensorFlowState

_R = TypeVar("_R")


def run(func: Callable[..., _R]) -> Callable[..., _R]:
    """Decorator: runs ``func(state, *args, **kwargs)`` so that it survives workers coming and going.

    Before each try the state is synchronised from rank 0; a lost peer (``HorovodInternalError``)
    restores the last commit, a change of hosts (``HostsUpdatedInterrupt``) keeps the state; then
    Horovod is re-initialised for the new world, in this same process, and ``func`` runs again.
    A peer lost inside a ``tf.function`` or a session (TensorFlow's ``AbortedError`` from one of
    hvd's kernels) counts as ``HorovodInternalError``. Collectives must not be the call to ``func``
    itself (new workers would run them while the others synchronise).

    :param func: the training function, called as ``func(state, *args, **kwargs)`` with a state such as
        :class:`~horovod.tensorflow.elastic.TensorFlowKerasState`.
    """
    return common_run(raising_horovod_errors(func))


__getattr__, __dir__, _names = lazy_exports(
    "horovod.tensorflow.elastic",
    globals(),
    {"state": "TensorFlowState", "keras_state": "TensorFlowKerasState"},
    ("errors", "keras_state", "state", "variables"),
    framework="tensorflow",
    install_hint="pip install tensorflow (or tensorflow-cpu), 2.16 or newer",
)
__all__ = ["ObjectState", "State", "run", "run_fn", *_names]
