"""How TensorFlow tensors reach hvd's engine, eagerly and inside graphs.

Eagerly, a collective submits its tensors and waits at once, through hvd-core's numpy collectives:
an input is read through the buffer protocol (``memoryview`` of an EagerTensor; ``.numpy()`` would
copy it), and a result becomes a tensor through DLPack, keeping the engine's output alive, where
TensorFlow can use its memory in place (aligned: every large result is); small unaligned results
and bfloat16, which neither protocol carries, are copied.

Inside a graph (a ``tf.function``, or a ``tf.compat.v1`` graph) a collective is one of hvd's
asynchronous kernels (:mod:`horovod.tensorflow.native`): it hands its tensors to the engine and
returns, and the engine completes it from its own thread. Measured on this project's 2-core
machine, 2 ranks: 200 separate allreduces in one ``tf.function`` take 5 ms a step where a pair of
``tf.numpy_function`` ops each (a submit and a wait, Python on every call) took 27, and one small
allreduce per call 0.39 ms where it took 0.45 (an empty ``tf.function`` call alone: 0.2).

Why no order can deadlock: a kernel holds no thread while its collective waits for the other
ranks, so TensorFlow's executor always has a thread for the next collective, whichever order it
picks on each rank (a ``tf.compat.v1`` graph orders nothing), and every rank eventually submits
every collective of the step. The collectives are stateless ops, so a ``tf.function``'s automatic
control dependencies do not chain them: they are all in flight together and the engine fuses them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from horovod.common import exceptions
from horovod.common.framework_api import NumpyAdapter, synchronize
from horovod.tensorflow import errors

#: submit(arrays) -> engine handles, one or more per call; finish(results) -> the output arrays.
Submit = Callable[[list[np.ndarray]], list[int]]
Finish = Callable[[list[Any]], list[np.ndarray]]
#: graph_op(tensors) -> the output tensors, from hvd's kernels (horovod.tensorflow.native).
GraphOp = Callable[[list[tf.Tensor]], Sequence[tf.Tensor]]


def as_tensor(value: Any) -> tf.Tensor:
    """``value`` as a tensor; a tensor itself as it is (``tf.convert_to_tensor`` costs a few us even
    then, measured: the internal collectives call this on what the public ones converted already)."""
    return value if isinstance(value, tf.Tensor) else tf.convert_to_tensor(value)


def in_graph() -> bool:
    """True while building a graph (tracing a tf.function, or tf.compat.v1 graph mode)."""
    return not tf.executing_eagerly()


def run(
    inputs: Sequence[tf.Tensor],
    submit: Submit,
    finish: Finish,
    graph_op: GraphOp,
    out_shapes: Sequence[tf.TensorShape | None],
) -> list[tf.Tensor]:
    """Runs one collective call over ``inputs`` and returns its outputs as tensors: eagerly through
    ``submit`` and ``finish``, in a graph as ``graph_op``, whose outputs get ``out_shapes`` (the
    static shapes known while building the graph; None: unknown)."""
    if not in_graph():
        arrays = [_array(t) for t in inputs]
        try:
            results = finish([synchronize(h) for h in submit(arrays)])
        except exceptions.CollectiveMismatchError as error:  # as Horovod's ops: FailedPreconditionError too
            raise errors.CollectiveMismatchError(str(error)) from error
        return [_tensor(r) for r in results]
    outputs = list(graph_op(list(inputs)))
    for output, shape in zip(outputs, out_shapes, strict=True):
        if shape is not None:
            output.set_shape(shape)
    return outputs


def _array(tensor: tf.Tensor) -> np.ndarray:
    """A CPU tensor's memory as a read-only numpy array (no copy, except for bfloat16)."""
    try:
        return np.asarray(memoryview(tensor))
    except (TypeError, ValueError, BufferError):  # bfloat16 ("cannot include dtype 'E'"), a GPU tensor
        array: np.ndarray = tensor.numpy()
        return array


#: TensorFlow's CPU kernels require their buffers aligned to this (a tensor imported through DLPack
#: unaligned is accepted, and the first kernel that reads it aborts the process: measured).
TF_ALIGNMENT = 64


class AlignedArrays(NumpyAdapter):
    """hvd-core's numpy adapter with outputs the bridge can hand to TensorFlow without a copy:
    numpy aligns to 16 bytes, TensorFlow needs TF_ALIGNMENT (measured: a 64 MiB allreduce's result
    was copied, 9 ms of its 16)."""

    def empty_like(self, array: np.ndarray) -> np.ndarray:
        raw = np.empty(array.nbytes + TF_ALIGNMENT, np.uint8)
        start = -raw.__array_interface__["data"][0] % TF_ALIGNMENT
        aligned: np.ndarray = np.ndarray(array.shape, array.dtype, buffer=raw, offset=start)
        return aligned


def _tensor(array: np.ndarray) -> tf.Tensor:
    """An engine's result as a tensor sharing its memory where TensorFlow can use it in place
    (aligned; large results are, starting on a page); a copy otherwise, and for bfloat16."""
    if array.__array_interface__["data"][0] % TF_ALIGNMENT == 0:
        try:
            return tf.experimental.dlpack.from_dlpack(array.__dlpack__())
        except (TypeError, ValueError, BufferError):  # bfloat16, which DLPack lacks
            pass
    return tf.convert_to_tensor(array)
