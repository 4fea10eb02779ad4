"""``TensorFlowState``: a list of TensorFlow variables, eagerly or in a ``tf.compat.v1`` session."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from horovod.tensorflow.elastic.variables import BROADCAST_NAME, VariablesState


class TensorFlowState(VariablesState):
    """Horovod's ``TensorFlowState(variables=None, session=None, **kwargs)``.

    ``variables`` (``tf.Variable`` or Keras variables) are saved as host copies of their values,
    restored by assigning those back, and synchronised by broadcasting them from rank 0 (one
    collective call for all). Eagerly (TensorFlow 2) ``variables`` must be given: TensorFlow 2
    keeps no global variables. In a ``tf.compat.v1`` graph the variables are read and written
    through ``session`` (default: the default session) and default to the graph's global
    variables. Every other keyword is a plain attribute (:class:`~horovod.common.elastic.ObjectState`).

    :param variables: the variables kept (``tf.Variable`` or Keras variables); required eagerly, default in a graph: the
        global variables.
    :param session: in a ``tf.compat.v1`` graph, the session variables are read and written through (default: the
        default session).
    :param kwargs: further attributes of the state, as plain values (:class:`~horovod.common.elastic.ObjectState`).
    """

    def __init__(self, variables: Sequence[Any] | None = None, session: Any = None, **kwargs: Any) -> None:
        eager = bool(tf.executing_eagerly())
        if session is None and not eager:
            session = tf.compat.v1.get_default_session()
            if session is None:
                raise ValueError(
                    "TensorFlowState in a tf.compat.v1 graph needs the session that holds the variables: "
                    "pass session=, or create the state inside `with session.as_default():`"
                )
        if variables is None:
            if session is None:
                raise ValueError(
                    "TensorFlowState needs variables= when executing eagerly (TensorFlow 2 keeps no global "
                    "variables): pass the model's and the optimizer's variables"
                )
            variables = session.graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
        self.variables = list(variables)
        self.session = session
        self._graph_ops: _SessionOps | None = None
        if session is not None:
            self._graph_ops = _SessionOps(session, self.variables)
        super().__init__(**kwargs)

    def _variables(self) -> list[Any]:
        return self.variables

    def _read(self, variables: Sequence[Any]) -> list[np.ndarray]:
        if self._graph_ops is None:
            return super()._read(variables)
        return self._graph_ops.read()

    def _write(self, variables: Sequence[Any], values: Sequence[np.ndarray]) -> None:
        if self._graph_ops is None:
            super()._write(variables, values)
        else:
            self._graph_ops.write(values)

    def _broadcast(self, variables: Sequence[Any]) -> None:
        if self._graph_ops is None:
            super()._broadcast(variables)
        else:
            self._graph_ops.broadcast()


class _SessionOps:
    """Reading, writing and broadcasting variables of a ``tf.compat.v1`` graph through its session.

    The broadcast op is made here, once, while the graph can still grow (a MonitoredSession
    finalizes it); writing adds no op: it feeds each variable's initializer its value, as
    ``tf.compat.v1.Variable.load`` does.
    """

    def __init__(self, session: Any, variables: list[Any]) -> None:
        from horovod.tensorflow.collectives import broadcast_

        self.session = session
        self.variables = variables
        with session.graph.as_default():
            self.broadcast_op = tf.group(*broadcast_(variables, 0, name=BROADCAST_NAME)) if variables else None

    def read(self) -> list[np.ndarray]:
        return [np.asarray(value) for value in self.session.run(self.variables)] if self.variables else []

    def write(self, values: Sequence[np.ndarray]) -> None:
        if not self.variables:
            return
        feeds = {v.initializer.inputs[1]: value for v, value in zip(self.variables, values, strict=True)}
        self.session.run([v.initializer for v in self.variables], feed_dict=feeds)

    def broadcast(self) -> None:
        if self.broadcast_op is not None:
            self.session.run(self.broadcast_op)
