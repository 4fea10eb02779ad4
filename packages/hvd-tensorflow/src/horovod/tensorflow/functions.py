"""Broadcasting state: variables, objects, and the session hook of tf.compat.v1 training."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from horovod.common import framework_api as api
from horovod.common.framework_api import ProcessSet, global_process_set, shared_parameters
from horovod.tensorflow import collectives


@shared_parameters
def broadcast_variables(
    variables: Sequence[tf.Variable],
    root_rank: int,
    process_set: ProcessSet = global_process_set,
    inplace: bool = False,
) -> Any:
    """Assigns ``root_rank``'s values to ``variables`` on every rank, all in one collective call.

    Eagerly the variables are updated before this returns (None is returned); in a graph the
    returned op does it when run. ``inplace`` is accepted as Horovod does (the result is the same).

    :param variables: the ``tf.Variable`` objects to overwrite with the root's values, the same on every rank and in the
        same order.
    :param root_rank: the rank whose values every rank gets.
    :param process_set: |shared|
    :param inplace: accepted as Horovod takes it; the result is the same.
    """
    values = collectives.broadcast_(variables, root_rank, process_set=process_set)
    if tf.executing_eagerly():
        return None
    return tf.group(*values)


def broadcast_global_variables(root_rank: int) -> Any:
    """An op broadcasting every global variable from ``root_rank`` (tf.compat.v1 graphs).

    :param root_rank: the rank whose values every rank gets.
    :raises RuntimeError: when executing eagerly (TensorFlow 2): use ``broadcast_variables``.
    """
    if tf.executing_eagerly():
        raise RuntimeError(
            "hvd.broadcast_global_variables() does not support eager execution; "
            "use hvd.broadcast_variables(<model and optimizer variables>, root_rank) instead"
        )
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):  # type: ignore[misc]  # (TF is untyped)
    """Broadcasts every global variable from ``root_rank`` once the session is created, so that
    every rank starts from the same weights (random initialisation or a checkpoint on the root).

    :param root_rank: the rank whose global variables every rank gets.
    :param device: accepted as Horovod takes it (the device of the broadcast); ignored.
    """

    def __init__(self, root_rank: int, device: str = "") -> None:
        super().__init__()
        self.root_rank = root_rank
        self.device = device  # accepted as Horovod does
        self.bcast_op: Any = None

    def begin(self) -> None:
        if self.bcast_op is None or self.bcast_op.graph != tf.compat.v1.get_default_graph():
            self.bcast_op = broadcast_global_variables(self.root_rank)

    def after_create_session(self, session: Any, coord: Any) -> None:
        """Runs the broadcast of the global variables in the new session.

        :param session: the session just created; the broadcast runs in it.
        :param coord: the session's coordinator (unused).
        """
        session.run(self.bcast_op)


@shared_parameters
def broadcast_object(
    obj: Any,
    root_rank: int = 0,
    session: Any = None,
    name: str | None = None,
    process_set: ProcessSet = global_process_set,
) -> Any:
    """Returns ``root_rank``'s ``obj`` on every rank (serialised with cloudpickle).

    ``session`` is accepted as Horovod's graph-mode form takes it: objects travel outside the
    graph, so the same call works eagerly and in tf.compat.v1 programs.

    :param obj: the object to send, read on the root only (anything cloudpickle can serialise).
    :param root_rank: the rank whose object is sent (default 0).
    :param session: accepted as Horovod's graph-mode form takes it (objects travel outside the graph); ignored.
    :param name: |shared|
    :param process_set: |shared|
    """
    return api.broadcast_object(obj, root_rank, name, process_set)


@shared_parameters
def broadcast_object_fn(
    root_rank: int = 0,
    session: Any = None,
    name: str | None = None,
    process_set: ProcessSet = global_process_set,
) -> Callable[[Any], Any]:
    """A function that broadcasts the object it is given from ``root_rank`` (Horovod's form for
    broadcasting many objects the same way).

    :param root_rank: the rank whose objects are sent (default 0).
    :param session: accepted as Horovod's graph-mode form takes it (objects travel outside the graph); ignored.
    :param name: |shared|
    :param process_set: |shared|
    """

    def broadcast(obj: Any) -> Any:
        return api.broadcast_object(obj, root_rank, name, process_set)

    return broadcast


@shared_parameters
def allgather_object(
    obj: Any, session: Any = None, name: str | None = None, process_set: ProcessSet = global_process_set
) -> list[Any]:
    """Returns the list of every rank's ``obj`` (in rank order).

    :param obj: this rank's object (anything cloudpickle can serialise).
    :param session: accepted as Horovod's graph-mode form takes it (objects travel outside the graph); ignored.
    :param name: |shared|
    :param process_set: |shared|
    """
    return api.allgather_object(obj, name, process_set)
