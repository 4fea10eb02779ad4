"""What TensorFlowState and TensorFlowKerasState share: a list of variables kept as host copies.

``save()`` copies every variable's value to host memory, ``restore()`` assigns the copies back and
``sync()`` broadcasts the variables from rank 0 (then copies them: what rank 0 holds is the last
commit of every rank of the new world). Plain attributes are hvd-core's ObjectState's.

Imports no TensorFlow: hvd-keras's ``KerasState`` derives from this, with Keras's own broadcast,
and runs on torch as well. Subclasses say which variables (``_variables``) and may change how they
are read, written and broadcast (``_read``, ``_write``, ``_broadcast``): a ``tf.compat.v1``
session does all three its own way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from horovod.common.elastic import ObjectState

#: The engine's name of the state's variable broadcast: a fixed name, so that a worker that just
#: joined and the workers it joins agree whatever each of them ran before.
BROADCAST_NAME = "__hvd.elastic.variables"


class VariablesState(ObjectState):
    """An ObjectState that also keeps the values of ``_variables()`` (a subclass's list)."""

    def __init__(
        self,
        bcast_object: Callable[[Any], Any] | None = None,
        get_rank: Callable[[], int] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(bcast_object=bcast_object, get_rank=get_rank, **kwargs)
        self._values = self._read(self._variables())

    # --- what subclasses define -------------------------------------------------------------

    def _variables(self) -> list[Any]:
        """The variables kept, in the same order on every rank (asked again at every use)."""
        raise NotImplementedError

    def _read(self, variables: Sequence[Any]) -> list[np.ndarray]:
        # A copy: the array a variable gives may share the variable's memory, which an
        # optimizer's update can change in place after the commit.
        return [np.array(v.numpy(), copy=True) for v in variables]

    def _write(self, variables: Sequence[Any], values: Sequence[np.ndarray]) -> None:
        for variable, value in zip(variables, values, strict=True):
            variable.assign(value)

    def _broadcast(self, variables: Sequence[Any]) -> None:
        from horovod.tensorflow.collectives import broadcast_

        broadcast_(list(variables), 0, name=BROADCAST_NAME)

    # --- the State contract ---------------------------------------------------------------------

    def save(self) -> None:
        self._values = self._read(self._variables())
        super().save()

    def restore(self) -> None:
        variables = self._variables()
        if len(variables) != len(self._values):
            raise ValueError(
                f"{type(self).__name__}: {len(variables)} variables to restore, but {len(self._values)} were "
                "saved; the variables kept must not change between commits"
            )
        self._write(variables, self._values)
        super().restore()

    def sync(self) -> None:
        variables = self._variables()
        _check_same_variables(variables)
        self._broadcast(variables)
        self._values = self._read(variables)
        super().sync()


def _signature(variable: Any) -> tuple[tuple[int | None, ...], str]:
    dtype = variable.dtype
    return tuple(variable.shape), str(getattr(dtype, "name", dtype))


def _check_same_variables(variables: Sequence[Any]) -> None:
    """Raises the same ValueError on every rank unless every rank keeps variables of the same
    shapes and dtypes: a rank with fewer (a model not built yet) would leave the others waiting in
    the broadcast for variables it never sends."""
    from horovod.common.framework_api import allgather_object

    signatures = allgather_object([_signature(v) for v in variables], name=f"{BROADCAST_NAME}.signature")
    differ = [r for r, s in enumerate(signatures) if s != signatures[0]]
    if differ:
        ranks = ", ".join(map(str, differ))
        raise ValueError(
            f"elastic state: rank(s) {ranks} keep other variables than rank 0 ({len(signatures[differ[0]])} "
            f"against {len(signatures[0])}, or of other shapes or dtypes); build the model (and the optimizer) "
            "alike on every worker before creating the state"
        )
