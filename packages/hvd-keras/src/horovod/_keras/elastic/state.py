"""``KerasState``: a Keras 3 model and its optimizer, on whichever backend Keras runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from horovod._keras.callbacks import broadcast_variables
from horovod.tensorflow.elastic.keras_state import TensorFlowKerasState
from horovod.tensorflow.elastic.variables import BROADCAST_NAME


class KerasState(TensorFlowKerasState):
    """Horovod's ``KerasState(model, optimizer=None, **kwargs)``: the model's and the optimizer's
    variables, and plain attributes (``batch``, ``epoch``... for the callbacks of this module).

    What is kept, and how, is ``horovod.tensorflow.elastic.TensorFlowKerasState``'s (an optimizer
    not built yet is built for the model's trainable variables); the broadcast of ``sync()`` is
    Keras's (numpy values through hvd-core), which every Keras backend reads and assigns alike.

    :param model: the Keras model whose variables are kept (built before the state is created).
    :param optimizer: the optimizer whose variables are kept (default: ``model.optimizer``).
    :param kwargs: further attributes of the state, as plain values (``batch``, ``epoch``... for the callbacks).
    """

    def __init__(self, model: Any, optimizer: Any = None, **kwargs: Any) -> None:
        super().__init__(model, optimizer=optimizer, **kwargs)

    def _broadcast(self, variables: Sequence[Any]) -> None:
        broadcast_variables(list(variables), 0, BROADCAST_NAME)
