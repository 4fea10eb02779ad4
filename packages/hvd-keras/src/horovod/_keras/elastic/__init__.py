"""Elastic training for Keras 3 (Horovod's ``hvd.elastic``): the one implementation behind
``horovod.keras.elastic`` and ``horovod.tensorflow.keras.elastic``.

``KerasState`` keeps a model and its optimizer (hvd-tensorflow's ``TensorFlowKerasState``, which
needs no TensorFlow, broadcasting through Keras's own helper so that it serves every backend);
the callbacks commit the state and keep its ``batch`` and ``epoch`` as ``model.fit`` goes.
"""

from __future__ import annotations

from horovod._keras.elastic.callbacks import CommitStateCallback, UpdateBatchStateCallback, UpdateEpochStateCallback
from horovod._keras.elastic.state import KerasState
from horovod.common.elastic import ObjectState, State, run_fn

# One run loop for TensorFlow and Keras: a peer lost inside model.fit's compiled step on TensorFlow
# (an AbortedError from one of hvd-tensorflow's kernels) counts as HorovodInternalError. Importing it
# loads no TensorFlow, so Keras on torch uses it too.
from horovod.tensorflow.elastic import run

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
