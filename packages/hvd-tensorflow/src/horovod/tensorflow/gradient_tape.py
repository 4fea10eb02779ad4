"""DistributedGradientTape and PartialDistributedGradientTape (TensorFlow 2 training).

The distributed tape is a ``tf.GradientTape`` (code that checks the type keeps working) that leaves
recording to the tape it wraps: ``gradient()`` asks the wrapped tape and averages the result over
the ranks, all gradients in one reduction.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import tensorflow as tf

from horovod.common.framework_api import Average, ProcessSet, global_process_set, shared_parameters
from horovod.tensorflow.compression import Compression
from horovod.tensorflow.gradients import GradientReducer
from horovod.tensorflow.variables import variable_key


class _DistributedGradientTape(tf.GradientTape):  # type: ignore[misc]  # (TensorFlow ships no type information)
    # Not initialised as a tape of its own on purpose: recording, watching and resetting are the
    # wrapped tape's, whichever of the two objects the user calls them on.
    def __init__(self, tape: tf.GradientTape, reducer: GradientReducer, scale_local_gradients: bool) -> None:
        self._wrapped = tape
        self._reducer = reducer
        self._local_sources: set[Any] = set()
        self._scale_local_gradients = scale_local_gradients

    def __enter__(self) -> _DistributedGradientTape:
        self._wrapped.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._wrapped.__exit__(*exc)

    def watch(self, tensor: Any) -> None:
        self._wrapped.watch(tensor)

    def stop_recording(self) -> Any:
        return self._wrapped.stop_recording()

    def reset(self) -> None:
        self._wrapped.reset()

    def watched_variables(self) -> Any:
        return self._wrapped.watched_variables()

    def jacobian(self, *args: Any, **kwargs: Any) -> Any:
        return self._wrapped.jacobian(*args, **kwargs)

    def batch_jacobian(self, *args: Any, **kwargs: Any) -> Any:
        return self._wrapped.batch_jacobian(*args, **kwargs)

    def register_local_source(self, source: Any) -> None:
        """Keeps ``source``'s gradient local (not reduced over the ranks)."""
        self._local_sources.add(variable_key(source))

    def register_local_sources(self, sources: Iterable[Any]) -> None:
        for source in sources:
            self.register_local_source(source)

    def gradient(
        self,
        target: Any,
        sources: Any,
        output_gradients: Any = None,
        unconnected_gradients: Any = tf.UnconnectedGradients.NONE,
    ) -> Any:
        gradients = self._wrapped.gradient(target, sources, output_gradients, unconnected_gradients)
        flat_sources = tf.nest.flatten(sources)
        flat_gradients = tf.nest.flatten(gradients, expand_composites=False)
        results = self._reducer.reduce_keeping_local(
            flat_gradients, flat_sources, self._local_sources, self._scale_local_gradients
        )
        return tf.nest.pack_sequence_as(gradients, results)


@shared_parameters
def DistributedGradientTape(
    gradtape: tf.GradientTape,
    device_dense: str = "",
    device_sparse: str = "",
    compression: Any = Compression.none,
    sparse_as_dense: bool = False,
    op: int = Average,
    gradient_predivide_factor: float = 1.0,
    num_groups: int = 0,
    groups: Any = None,
    process_set: ProcessSet = global_process_set,
    scale_local_gradients: bool = True,
) -> _DistributedGradientTape:
    """A tape whose ``gradient()`` returns gradients averaged (``op``) over the ranks.

    ``groups``: an integer (that many groups of gradients, each reduced as one unit) or lists of
    variables reduced together; ``gradient_predivide_factor`` splits the average into a division
    before the sum and one after it. ``device_dense``/``device_sparse`` are accepted as Horovod
    takes them.

    :param gradtape: the ``tf.GradientTape`` that records the forward pass; its ``gradient()`` computes the local
        gradients.
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
    :param scale_local_gradients: scale the gradients of local sources (see ``register_local_source``) by ``1/size``
        (default ``True``), as the reduced ones are averaged.
    """
    reducer = GradientReducer(
        "DistributedGradientTape",
        compression,
        sparse_as_dense,
        op,
        gradient_predivide_factor,
        num_groups,
        groups,
        process_set,
    )
    return _DistributedGradientTape(gradtape, reducer, scale_local_gradients)


@shared_parameters
def PartialDistributedGradientTape(
    gradtape: tf.GradientTape,
    device_dense: str = "",
    device_sparse: str = "",
    compression: Any = Compression.none,
    sparse_as_dense: bool = False,
    op: int = Average,
    gradient_predivide_factor: float = 1.0,
    num_groups: int = 0,
    groups: Any = None,
    process_set: ProcessSet = global_process_set,
    local_layers: Any = None,
    scale_local_gradients: bool = True,
) -> _DistributedGradientTape:
    """A DistributedGradientTape whose ``local_layers`` (a Keras layer or a list of them) keep
    their gradients local: they are not reduced, only scaled by 1/size unless
    ``scale_local_gradients=False``.

    :param gradtape: the ``tf.GradientTape`` that records the forward pass; its ``gradient()`` computes the local
        gradients.
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
    :param scale_local_gradients: scale the local layers' gradients by ``1/size`` (default ``True``).
    :param local_layers: a Keras layer or a list of them whose gradients stay local: not reduced (``ValueError`` for
        anything else).
    """
    tape = DistributedGradientTape(
        gradtape,
        device_dense,
        device_sparse,
        compression,
        sparse_as_dense,
        op,
        gradient_predivide_factor,
        num_groups=num_groups,
        groups=groups,
        process_set=process_set,
        scale_local_gradients=scale_local_gradients,
    )
    layers = [] if local_layers is None else local_layers if isinstance(local_layers, (list, tuple)) else [local_layers]
    for layer in layers:
        if not hasattr(layer, "trainable_weights"):
            raise ValueError(f"local_layers must be Keras layers, got {type(layer).__name__}")
        tape.register_local_sources(layer.trainable_weights)
    return tape
