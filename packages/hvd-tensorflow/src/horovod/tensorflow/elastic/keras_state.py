"""``TensorFlowKerasState``: a Keras 3 model and its optimizer, kept by elastic training.

Written on Keras 3's public API only (``model.variables``, ``optimizer.variables``,
``optimizer.build``, a variable's ``numpy()`` and ``assign``), importing neither Keras nor
TensorFlow: hvd-keras's ``KerasState`` is this class with Keras's own broadcast, for every backend
hvd's Keras support runs on.
"""

from __future__ import annotations

from typing import Any

from horovod.tensorflow.elastic.variables import VariablesState


class TensorFlowKerasState(VariablesState):
    """Horovod's ``TensorFlowKerasState(model, optimizer=None, backend=None, **kwargs)``.

    Keeps the model's variables (weights and the rest of its state) and the optimizer's (its
    iteration count and slots, such as momentum): saved as host copies, restored by assigning them
    back, synchronised by broadcasting them from rank 0. ``optimizer`` defaults to the model's
    (``model.compile``); ``backend`` is accepted as Horovod takes it (TensorFlow 1's Keras session;
    Keras 3 has none). Every other keyword is a plain attribute.

    Keras creates an optimizer's slots when it first updates, so a worker that joins a running job
    would have none of the slots rank 0 broadcasts: an optimizer not built yet is built here for
    the model's trainable variables, as ``model.fit`` builds it. Build the model itself (give it
    its input shape) before creating the state, on every worker alike.

    :param model: the Keras model whose variables are kept (built before the state is created).
    :param optimizer: the Keras optimizer whose variables are kept (default: ``model.optimizer``).
    :param backend: accepted as Horovod takes it (TensorFlow 1's Keras session); unused.
    :param kwargs: further attributes of the state, as plain values (:class:`~horovod.common.elastic.ObjectState`).
    """

    def __init__(self, model: Any, optimizer: Any = None, backend: Any = None, **kwargs: Any) -> None:
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
        self.backend = backend
        super().__init__(**kwargs)

    def _variables(self) -> list[Any]:
        # Asked again at every use: the optimizer may be replaced, or built by then.
        variables = list(self.model.variables)
        optimizer = self.optimizer
        if optimizer is not None:
            if not optimizer.built:
                optimizer.build(self.model.trainable_variables)
            variables += list(optimizer.variables)
        return variables
