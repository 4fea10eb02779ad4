"""Keras on TensorFlow: gradients and tensors through hvd-tensorflow.

Inside ``model.fit``'s compiled train step (a ``tf.function``) the gradients go to the engine as
hvd-tensorflow's asynchronous kernels, all of a step's in one op, so they are fused.
"""

from __future__ import annotations

from typing import Any

import horovod.tensorflow as hvd_tf
from horovod._keras.compression import backend_compressor
from horovod._keras.frameworks import GradientSettings
from horovod.tensorflow.gradients import GradientReducer


class TensorFlowFramework:
    name = "tensorflow"

    def gradient_reducer(self, settings: GradientSettings) -> GradientReducer:
        return GradientReducer(
            settings.prefix,
            backend_compressor(settings.compression, hvd_tf.Compression),
            settings.sparse_as_dense,
            settings.op,
            settings.gradient_predivide_factor,
            settings.num_groups,
            settings.groups,
            settings.process_set,
        )

    def allreduce(
        self, value: Any, name: str | None, op: int, prescale: float, postscale: float, compression: Any
    ) -> Any:
        return hvd_tf.allreduce(
            value,
            name=name,
            op=op,
            prescale_factor=prescale,
            postscale_factor=postscale,
            compression=backend_compressor(compression, hvd_tf.Compression),
        )

    def allgather(self, value: Any, name: str | None) -> Any:
        return hvd_tf.allgather(value, name=name)

    def broadcast(self, value: Any, root_rank: int, name: str | None) -> Any:
        return hvd_tf.broadcast(value, root_rank, name=name)

    def reducescatter(self, value: Any, name: str | None, op: int) -> Any:
        return hvd_tf.reducescatter(value, name=name, op=op)
