"""DistributedOptimizer for ``tf.compat.v1.train`` optimizers.

``compute_gradients`` averages the wrapped optimizer's gradients over the ranks (all of them in
one reduction). With ``backward_passes_per_step=N`` the gradients of N calls are summed locally
(in variables beside the model's) and reduced and applied on every N-th ``apply_gradients``.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from horovod.common.framework_api import Average, ProcessSet, global_process_set, shared_parameters
from horovod.tensorflow.compression import Compression
from horovod.tensorflow.gradients import GradientReducer
from horovod.tensorflow.variables import variable_key


class _DistributedOptimizer(tf.compat.v1.train.Optimizer):  # type: ignore[misc]  # (TensorFlow ships no type information)
    def __init__(
        self,
        optimizer: Any,
        reducer: GradientReducer,
        name: str | None,
        use_locking: bool,
        backward_passes_per_step: int,
        average_aggregated_gradients: bool,
        scale_local_gradients: bool = True,
    ) -> None:
        if name is None:
            name = f"Distributed{type(optimizer).__name__}"
        super().__init__(name=name, use_locking=use_locking)
        self._optimizer = optimizer
        self._reducer = reducer
        self._passes = backward_passes_per_step
        self._average_aggregated = average_aggregated_gradients
        self._accumulators: dict[Any, tf.Variable] = {}
        self._counter: tf.Variable | None = None
        self._local_vars: set[Any] = set()
        self._scale_local_gradients = scale_local_gradients

    def register_local_var(self, var: Any) -> None:
        """Keeps ``var``'s gradient this rank's own (not reduced over the ranks; scaled by 1/size
        unless ``scale_local_gradients=False``), as Horovod's optimizer does.

        :param var: a variable the wrapped optimizer updates.
        """
        self._local_vars.add(variable_key(var))

    # --- gradients ---------------------------------------------------------------------------------

    def compute_gradients(self, *args: Any, **kwargs: Any) -> list[tuple[Any, Any]]:
        """The wrapped optimizer's gradients, averaged over the ranks (every N-th pass with
        backward_passes_per_step=N; between those, this rank's running sums)."""
        grads_and_vars = self._optimizer.compute_gradients(*args, **kwargs)
        gradients = [g for g, _ in grads_and_vars]
        variables = [v for _, v in grads_and_vars]
        if self._passes == 1:
            reduced = self._reducer.reduce_keeping_local(
                gradients, variables, self._local_vars, self._scale_local_gradients
            )
        else:
            reduced = self._accumulate_and_reduce(gradients, variables)
        return list(zip(reduced, variables, strict=True))

    def _accumulate_and_reduce(self, gradients: list[Any], variables: list[Any]) -> list[Any]:
        counter = self._counter_variable()
        updates = []
        for g, v in zip(gradients, variables, strict=True):
            if g is None:
                continue
            updates.append(self._accumulator(v).assign_add(tf.convert_to_tensor(g)))
        with tf.control_dependencies(updates):
            due = tf.equal(tf.math.floormod(counter + 1, self._passes), 0)
        present = [i for i, g in enumerate(gradients) if g is not None]
        scale = 1.0 / self._passes if self._average_aggregated else 1.0

        def reduce_sums() -> list[tf.Tensor]:
            sums = [self._accumulators[variables[i].ref()].read_value() * scale for i in present]
            reduced = self._reducer.reduce_keeping_local(
                sums, [variables[i] for i in present], self._local_vars, self._scale_local_gradients
            )
            return [tf.convert_to_tensor(r) for r in reduced]

        def local_sums() -> list[tf.Tensor]:
            return [tf.identity(self._accumulators[variables[i].ref()].read_value()) for i in present]

        with tf.control_dependencies(updates):
            results = tf.cond(due, reduce_sums, local_sums)
        out: list[Any] = [None] * len(gradients)
        for i, r in zip(present, results, strict=True):
            out[i] = r
        return out

    def _counter_variable(self) -> tf.Variable:
        if self._counter is None:
            self._counter = tf.Variable(0, dtype=tf.int64, trainable=False, name="hvd_aggregation_counter")
        return self._counter

    def _accumulator(self, variable: Any) -> tf.Variable:
        key = variable.ref()
        if key not in self._accumulators:
            self._accumulators[key] = tf.Variable(
                tf.zeros(variable.shape, dtype=variable.dtype.base_dtype), trainable=False, name="hvd_aggregated"
            )
        return self._accumulators[key]

    # --- applying them -----------------------------------------------------------------------------

    def apply_gradients(self, grads_and_vars: Any, global_step: Any = None, name: str | None = None) -> Any:
        grads_and_vars = list(grads_and_vars)
        if self._passes == 1:
            return self._optimizer.apply_gradients(grads_and_vars, global_step=global_step, name=name)
        counter = self._counter_variable()
        # The counter is read and advanced only after the gradients exist: compute_gradients read
        # it to choose between reducing and accumulating, and in a tf.compat.v1 graph nothing else
        # orders that read before this increment (the skipping branch does not wait for the
        # gradients), so ranks could choose differently and wait on different collectives.
        gradients = [tf.convert_to_tensor(g) for g, _ in grads_and_vars if g is not None]
        with tf.control_dependencies(gradients):
            due = tf.equal(tf.math.floormod(counter + 1, self._passes), 0)

        def apply() -> tf.Tensor:
            applied = self._optimizer.apply_gradients(grads_and_vars, global_step=global_step, name=name)
            with tf.control_dependencies([applied]):
                resets = [acc.assign(tf.zeros_like(acc)) for acc in self._accumulators.values()]
            with tf.control_dependencies(resets):
                return tf.constant(True)

        def skip() -> tf.Tensor:
            return tf.constant(False)

        applied = tf.cond(due, apply, skip)
        with tf.control_dependencies([applied, *gradients]):
            return counter.assign_add(1).op if not tf.executing_eagerly() else counter.assign_add(1)

    # --- the rest is the wrapped optimizer's ---------------------------------------------------------

    def get_slot(self, *args: Any, **kwargs: Any) -> Any:
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args: Any, **kwargs: Any) -> Any:
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args: Any, **kwargs: Any) -> Any:
        return self._optimizer.variables(*args, **kwargs)


@shared_parameters
def DistributedOptimizer(
    optimizer: Any,
    name: str | None = None,
    use_locking: bool = False,
    device_dense: str = "",
    device_sparse: str = "",
    compression: Any = Compression.none,
    sparse_as_dense: bool = False,
    backward_passes_per_step: int = 1,
    op: int = Average,
    gradient_predivide_factor: float = 1.0,
    average_aggregated_gradients: bool = False,
    num_groups: int = 0,
    groups: Any = None,
    process_set: ProcessSet = global_process_set,
    scale_local_gradients: bool = True,
) -> Any:
    """Wraps a ``tf.compat.v1.train`` optimizer so that its gradients are averaged over the ranks
    before they are applied. Keras optimizers are wrapped by ``horovod.tensorflow.keras``.

    :param optimizer: the ``tf.compat.v1.train.Optimizer`` to wrap (``ValueError`` for another).
    :param name: the name of the wrapping optimizer (default ``Distributed<class name>``).
    :param use_locking: use locks for the update operations, as ``tf.compat.v1.train.Optimizer`` takes it.
    :param device_dense: accepted for Horovod's signature (the device dense gradients are reduced on); ignored.
    :param device_sparse: accepted for Horovod's signature (the device sparse gradients are gathered on); ignored.
    :param compression: |shared:gradient_compression|
    :param sparse_as_dense: reduce sparse gradients (``tf.IndexedSlices``) as dense tensors instead of allgathering
        their values and indices.
    :param op: |shared:gradient_op|
    :param gradient_predivide_factor: |shared|
    :param num_groups: deprecated: a number of groups, as ``groups`` takes it.
    :param groups: gradients reduced together as one grouped allreduce: a number of groups (the variables split into
        that many consecutive groups), or a list of lists of variables, each list a group. By default none; not together
        with ``num_groups``.
    :param process_set: the ranks gradients are reduced over (default ``global_process_set``, every rank).
    :param backward_passes_per_step: the number of gradient computations accumulated locally before they are reduced and
        applied (default 1; at least 1).
    :param average_aggregated_gradients: divide the accumulated gradients by ``backward_passes_per_step`` (default:
        their sum is reduced).
    :param scale_local_gradients: divide the gradients of variables registered local (``register_local_var``), which
        are not reduced, by the number of ranks, as averaged ones are (default ``True``).
    """
    if not isinstance(optimizer, tf.compat.v1.train.Optimizer):
        raise ValueError(
            f"hvd.DistributedOptimizer in horovod.tensorflow wraps tf.compat.v1.train optimizers, got "
            f"{type(optimizer).__module__}.{type(optimizer).__name__}; for a Keras optimizer use "
            "horovod.tensorflow.keras.DistributedOptimizer (pip install hvd-keras), or "
            "hvd.DistributedGradientTape in a custom training loop"
        )
    if backward_passes_per_step < 1:
        raise ValueError(f"backward_passes_per_step must be at least 1, got {backward_passes_per_step}")
    reducer = GradientReducer(
        "DistributedOptimizer",
        compression,
        sparse_as_dense,
        op,
        gradient_predivide_factor,
        num_groups,
        groups,
        process_set,
    )
    return _DistributedOptimizer(
        optimizer,
        reducer,
        name,
        use_locking,
        backward_passes_per_step,
        average_aggregated_gradients,
        scale_local_gradients,
    )
