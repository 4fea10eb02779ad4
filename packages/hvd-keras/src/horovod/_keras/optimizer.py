"""DistributedOptimizer for Keras 3: any Keras optimizer, its gradients reduced over the ranks.

The wrapped optimizer is an instance of a subclass of its own class (``isinstance(opt, SGD)`` holds)
that overrides ``apply``, which Keras 3 calls for every update (``apply_gradients`` and
``model.fit``'s train step both go through it): the gradients are reduced first, every one of a
step in one submission to the engine (inside ``model.fit`` on TensorFlow: one of hvd-tensorflow's
kernels in the compiled train step), then the base class applies them. The subclass serializes as
its base class (same module, name and config), so a saved model loads anywhere, and
:func:`horovod._keras.saving.load_model` wraps the loaded optimizer again, its state kept.

With ``backward_passes_per_step=N`` this rank's gradients are summed locally for N calls, and every
N-th call reduces the sum (divided by N with ``average_aggregated_gradients``) and applies it. The
sums live in variables of this wrapper's own, not the optimizer's: they are never saved with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras

from horovod._keras import frameworks
from horovod._keras.compression import Compression
from horovod._keras.frameworks import GradientSettings
from horovod.common.framework_api import (
    Average,
    ProcessSet,
    check_gradient_options,
    global_process_set,
    set_size,
    shared_parameters,
)

_DISTRIBUTED_CLASSES: dict[type, type] = {}


class _Distributed:
    """What a distributed optimizer's class adds to its base (an attribute holder, not a base
    optimizer: see :func:`_distributed_class`)."""

    _hvd: _HvdState

    def apply(self, grads: Sequence[Any], trainable_variables: Sequence[Any] | None = None) -> Any:
        base_apply = super().apply  # type: ignore[misc]  # (the optimizer class this is mixed into)
        variables = list(trainable_variables) if trainable_variables is not None else list(self._trainable_variables)  # type: ignore[attr-defined]
        state = self._hvd
        if state.passes == 1:
            return base_apply(state.reduce(list(grads), variables), trainable_variables)
        state.accumulate(list(grads), variables)

        def reduce_and_apply() -> None:
            base_apply(state.reduce(state.accumulated(), variables), trainable_variables)
            state.reset()

        keras.ops.cond(state.is_update_step(), reduce_and_apply, lambda: None)
        return None

    def build(self, variables: Sequence[Any]) -> None:
        super().build(variables)  # type: ignore[misc]
        self._hvd.prepare(variables)

    def register_local_var(self, var: Any) -> None:
        """Keeps ``var``'s gradient local: not reduced over the ranks (divided by the process set's
        size unless ``scale_local_gradients=False``), as Horovod's optimizer does.

        :param var: a variable the optimizer updates (a layer's weight).
        """
        self._hvd.local.add(id(var))


class _HvdState:
    """A distributed optimizer's settings, reducer and local sums. Held as one plain object, which
    Keras's attribute tracking leaves alone (its variables are not the optimizer's)."""

    def __init__(
        self, settings: GradientSettings, passes: int, average_aggregated: bool, scale_local: bool = True
    ) -> None:
        self.settings = settings
        self.passes = passes
        self.average_aggregated = average_aggregated
        self.scale_local = scale_local
        #: ids of the variables whose gradients stay local (register_local_var)
        self.local: set[int] = set()
        self._reducer: Any = None
        self._sums: list[Any] | None = None
        self._count: Any = None

    def reduce(self, gradients: list[Any], variables: Sequence[Any]) -> list[Any]:
        if self._reducer is None:  # the backend's adapter, once Keras runs
            self._reducer = frameworks.current().gradient_reducer(self.settings)
        variables = list(variables)
        if not self.local:
            return list(self._reducer.reduce(gradients, variables))
        shared = [i for i, v in enumerate(variables) if id(v) not in self.local]
        reduced = list(self._reducer.reduce([gradients[i] for i in shared], [variables[i] for i in shared]))
        results = list(gradients)
        for i, gradient in zip(shared, reduced, strict=True):
            results[i] = gradient
        if self.scale_local:
            size = set_size(self.settings.process_set)
            for i, v in enumerate(variables):
                if id(v) in self.local and results[i] is not None:
                    results[i] = results[i] / size
        return results

    def prepare(self, variables: Sequence[Any]) -> None:
        """Creates the local sums of backward_passes_per_step > 1, when Keras builds the optimizer."""
        if self.passes == 1 or self._sums is not None:
            return
        # Initializers, not values: Keras creates the variables under TensorFlow's init scope when the
        # optimizer is built while a train step is being traced (model.fit on TensorFlow does that).
        self._sums = [
            keras.Variable("zeros", shape=v.shape, dtype=v.dtype, trainable=False, name="hvd_gradient_sum")
            for v in variables
        ]
        self._count = keras.Variable("zeros", shape=(), dtype="int64", trainable=False, name="hvd_backward_passes")

    def accumulate(self, gradients: list[Any], variables: Sequence[Any]) -> None:
        self.prepare(variables)
        assert self._sums is not None and self._count is not None
        for total, gradient in zip(self._sums, gradients, strict=True):
            if gradient is not None:
                total.assign_add(keras.ops.cast(keras.ops.convert_to_tensor(gradient), total.dtype))
        self._count.assign_add(1)

    def is_update_step(self) -> Any:
        return keras.ops.equal(self._count % self.passes, 0)

    def accumulated(self) -> list[Any]:
        assert self._sums is not None
        scale = 1.0 / self.passes if self.average_aggregated else 1.0
        return [total.value * scale if scale != 1.0 else total.value for total in self._sums]

    def reset(self) -> None:
        assert self._sums is not None
        for total in self._sums:
            total.assign(keras.ops.zeros(total.shape, total.dtype))


def _distributed_class(base: type) -> type:
    """``base`` with ``apply`` reducing gradients first; it has ``base``'s module and names, so
    Keras serializes it as ``base`` (loading needs nothing of hvd's)."""
    cls = _DISTRIBUTED_CLASSES.get(base)
    if cls is None:
        attrs = {"__module__": base.__module__, "__qualname__": base.__qualname__, "__doc__": base.__doc__}
        cls = type(base.__name__, (_Distributed, base), attrs)
        _DISTRIBUTED_CLASSES[base] = cls
    return cls


def _check_optimizer(optimizer: Any) -> None:
    if isinstance(optimizer, _Distributed):
        raise ValueError(
            f"{type(optimizer).__name__} is already a DistributedOptimizer: wrap the original optimizer once"
        )
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        kind = f"{type(optimizer).__module__}.{type(optimizer).__qualname__}"
        raise TypeError(
            f"DistributedOptimizer wraps Keras 3 optimizers (keras.optimizers.Optimizer), not {kind}. "
            "Keras 2 optimizers (tf_keras, keras<3) are not supported: create the optimizer from keras "
            "(e.g. keras.optimizers.SGD); for tf.compat.v1.train optimizers use horovod.tensorflow.DistributedOptimizer"
        )


def gradient_settings(
    prefix: str,
    compression: Any,
    sparse_as_dense: bool,
    gradient_predivide_factor: float,
    op: int,
    num_groups: int,
    groups: Any,
    process_set: ProcessSet,
) -> GradientSettings:
    """Horovod's gradient options, checked: every misuse raises here, on every rank alike."""
    num_groups, groups = check_gradient_options(
        op, gradient_predivide_factor, num_groups, groups, "DistributedOptimizer"
    )
    return GradientSettings(
        prefix, compression, sparse_as_dense, op, float(gradient_predivide_factor), num_groups, groups, process_set
    )


def attach(
    optimizer: Any, settings: GradientSettings, passes: int, average_aggregated: bool, scale_local: bool = True
) -> Any:
    """Makes ``optimizer`` itself distributed (its state kept): how a loaded optimizer is wrapped."""
    if passes < 1:
        raise ValueError(f"backward_passes_per_step must be at least 1, got {passes}")
    optimizer.__class__ = _distributed_class(type(optimizer))
    optimizer._hvd = _HvdState(settings, passes, average_aggregated, scale_local)
    if optimizer.built:
        optimizer._hvd.prepare(optimizer._trainable_variables)
    return optimizer


@shared_parameters
def DistributedOptimizer(
    optimizer: Any,
    name: str | None = None,
    device_dense: str = "",
    device_sparse: str = "",
    compression: Any = Compression.none,
    sparse_as_dense: bool = False,
    gradient_predivide_factor: float = 1.0,
    op: int = Average,
    backward_passes_per_step: int = 1,
    average_aggregated_gradients: bool = False,
    num_groups: int = 0,
    groups: Any = None,
    process_set: ProcessSet = global_process_set,
    scale_local_gradients: bool = True,
) -> Any:
    """A new optimizer of ``optimizer``'s class and configuration whose updates use gradients
    reduced (``op``, default Average) over the ranks of ``process_set``.

    ``name``: the prefix of the engine's names for the gradients (default ``Distributed<Class>``);
    the optimizer keeps its own Keras name. ``groups``: an integer (that many groups of gradients,
    each reduced as one unit) or lists of variables reduced together. ``device_dense`` and
    ``device_sparse`` are accepted as Horovod takes them.

    :param optimizer: the Keras optimizer whose class and configuration the new optimizer takes (``optimizer`` itself is
        left as it is).
    :param name: the prefix of the engine's names for the gradients (default ``Distributed<Class>``); the optimizer
        keeps its own Keras name.
    :param device_dense: accepted as Horovod takes it; ignored.
    :param device_sparse: accepted as Horovod takes it; ignored.
    :param compression: |shared:gradient_compression|
    :param sparse_as_dense: reduce sparse gradients as dense tensors instead of allgathering their values and indices.
    :param gradient_predivide_factor: |shared|
    :param op: |shared:gradient_op|
    :param backward_passes_per_step: the number of batches whose gradients are accumulated locally before they are
        reduced and applied (default 1).
    :param average_aggregated_gradients: divide the accumulated gradients by ``backward_passes_per_step`` (default:
        their sum is applied).
    :param num_groups: deprecated: a number of groups, as ``groups`` takes it.
    :param groups: gradients reduced together as one grouped allreduce: a number of groups, or a list of lists of
        variables, each list a group; by default none.
    :param process_set: the ranks gradients are reduced over (default ``global_process_set``, every rank).
    :param scale_local_gradients: divide the gradients of variables kept local (``register_local_var``) by the process
        set's size (default ``True``, as Horovod does).
    """
    _check_optimizer(optimizer)
    settings = gradient_settings(
        name or f"Distributed{type(optimizer).__name__}",
        compression,
        sparse_as_dense,
        gradient_predivide_factor,
        op,
        num_groups,
        groups,
        process_set,
    )
    distributed = type(optimizer).from_config(optimizer.get_config())
    return attach(distributed, settings, backward_passes_per_step, average_aggregated_gradients, scale_local_gradients)


@shared_parameters
def PartialDistributedOptimizer(
    optimizer: Any,
    name: str | None = None,
    device_dense: str = "",
    device_sparse: str = "",
    compression: Any = Compression.none,
    sparse_as_dense: bool = False,
    gradient_predivide_factor: float = 1.0,
    op: int = Average,
    backward_passes_per_step: int = 1,
    average_aggregated_gradients: bool = False,
    groups: Any = None,
    process_set: ProcessSet = global_process_set,
    local_layers: Any = None,
    scale_local_gradients: bool = True,
) -> Any:
    """A :func:`DistributedOptimizer` whose ``local_layers`` keep their gradients local: each rank
    trains its own copy of them (their gradients divided by the process set's size unless
    ``scale_local_gradients=False``). Give their weights to ``BroadcastGlobalVariablesCallback``'s
    ``local_variables`` too, so that the broadcast leaves them alone.

    :param optimizer: the Keras optimizer whose class and configuration the new optimizer takes.
    :param name: the prefix of the engine's names for the gradients (default ``Distributed<Class>``).
    :param device_dense: accepted as Horovod takes it; ignored.
    :param device_sparse: accepted as Horovod takes it; ignored.
    :param compression: |shared:gradient_compression|
    :param sparse_as_dense: reduce sparse gradients as dense tensors instead of allgathering their values and indices.
    :param gradient_predivide_factor: |shared|
    :param op: |shared:gradient_op|
    :param backward_passes_per_step: the number of batches whose gradients are accumulated locally before they are
        reduced and applied (default 1).
    :param average_aggregated_gradients: divide the accumulated gradients by ``backward_passes_per_step``.
    :param groups: gradients reduced together as one grouped allreduce: a number of groups, or lists of variables.
    :param process_set: the ranks gradients are reduced over (default ``global_process_set``, every rank).
    :param local_layers: a Keras layer or a list of them whose weights' gradients stay local (``ValueError`` for
        anything else).
    :param scale_local_gradients: divide the local layers' gradients by the process set's size (default ``True``).
    """
    layers = [] if local_layers is None else local_layers if isinstance(local_layers, (list, tuple)) else [local_layers]
    for layer in layers:
        if not isinstance(layer, keras.layers.Layer):
            raise ValueError(f"local_layers must be Keras layers, got {type(layer).__name__}")
    distributed = DistributedOptimizer(
        optimizer,
        name,
        device_dense,
        device_sparse,
        compression,
        sparse_as_dense,
        gradient_predivide_factor,
        op,
        backward_passes_per_step,
        average_aggregated_gradients,
        0,
        groups,
        process_set,
        scale_local_gradients,
    )
    for layer in layers:
        for weight in layer.trainable_weights:
            distributed.register_local_var(weight)
    return distributed
