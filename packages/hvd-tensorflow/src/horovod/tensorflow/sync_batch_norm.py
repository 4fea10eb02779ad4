"""SyncBatchNormalization: batch normalisation with statistics over every rank's batch."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from horovod.common.framework_api import ProcessSet, Sum, global_process_set
from horovod.tensorflow import mpi_ops


class SyncBatchNormalization(keras.layers.BatchNormalization):  # type: ignore[misc]  # (Keras is untyped)
    """``keras.layers.BatchNormalization`` whose training-time mean and variance are those of the
    batch of every rank together (count-weighted, so ranks may have batches of different sizes).
    The statistics' allreduce is differentiable, so the gradient reaches every rank's inputs.

    :param args: positional arguments of ``keras.layers.BatchNormalization`` (``axis``, ``momentum``, ``epsilon``...).
    :param process_set: the ranks whose batches are normalised together (keyword only; default ``global_process_set``,
        every rank).
    :param kwargs: keyword arguments of ``keras.layers.BatchNormalization``; Horovod's ``fused`` is accepted and ignored
        (Keras 3 has no fused kernel).
    """

    def __init__(self, *args: Any, process_set: ProcessSet = global_process_set, **kwargs: Any) -> None:
        kwargs.pop("fused", None)  # Horovod's Keras 2 argument; Keras 3 has no fused kernel
        super().__init__(*args, **kwargs)
        self.process_set = process_set

    def _moments(self, inputs: Any, mask: Any) -> tuple[Any, Any]:
        axes = self._reduction_axes
        x = tf.convert_to_tensor(inputs)
        if mask is None:
            weights = tf.ones_like(x)
        else:
            weights = tf.cast(tf.broadcast_to(tf.expand_dims(mask, -1), tf.shape(x)), x.dtype)
        local = [
            tf.reduce_sum(weights, axis=axes),
            tf.reduce_sum(x * weights, axis=axes),
            tf.reduce_sum(tf.square(x) * weights, axis=axes),
        ]
        name = mpi_ops.step_name(f"SyncBatchNormalization.{self.name}")
        count, total, total_squares = mpi_ops.grouped_allreduce_tensors(local, name, Sum, 1.0, 1.0, self.process_set)
        count = tf.maximum(count, 1.0)
        mean = total / count
        variance = tf.maximum(total_squares / count - tf.square(mean), 0.0)
        return mean, variance
