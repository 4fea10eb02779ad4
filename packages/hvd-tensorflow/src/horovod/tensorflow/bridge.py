"""How TensorFlow tensors reach hvd's engine, eagerly and inside graphs.

Nothing here is compiled against TensorFlow: tensors cross as numpy arrays that share their memory
(``EagerTensor.numpy()`` and ``tf.numpy_function``'s arguments are views of CPU tensors), and hvd-core's
numpy collectives submit them to the engine.

Eagerly, a collective submits and waits at once. Inside a graph (``tf.function``, ``tf.compat.v1``)
one collective is two ops:

- a *submit* op (stateful) hands every input to the engine and returns the engine's handles at once;
- a *wait* op (stateless) takes those handles and returns the results.

Why two: ``tf.function`` runs stateful ops in program order, which is the same on every rank, and a
submit never blocks, so every rank submits every collective of a step in the same order whatever
TensorFlow's executor does with the waits. A wait only blocks on work this rank has submitted, and
every rank submits it eventually, so no ordering of the waits can deadlock two ranks; and since the
submits of a step follow each other without waiting, the engine fuses what is in flight together.
A blocking op per collective would run the step's collectives one after another, unfused, and on
TensorFlow's small inter-op pool could block every thread on collectives the peers submit later.
Several tensors that belong together (a step's gradients) go through one submit op and one wait op.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from horovod.common.framework_api import synchronize

#: submit(arrays) -> engine handles, one or more per call; finish(results) -> the output arrays.
Submit = Callable[[list[np.ndarray]], list[int]]
Finish = Callable[[list[Any]], list[np.ndarray]]


def in_graph() -> bool:
    """True while building a graph (tracing a tf.function, or tf.compat.v1 graph mode)."""
    return not tf.executing_eagerly()


def run(
    inputs: Sequence[tf.Tensor],
    submit: Submit,
    finish: Finish,
    out_dtypes: Sequence[tf.DType],
    out_shapes: Sequence[tf.TensorShape | None],
    name: str,
) -> list[tf.Tensor]:
    """Runs one collective call over ``inputs`` and returns its outputs as tensors.

    ``out_shapes`` are the static shapes known while building a graph (None: unknown).
    """
    if not in_graph():
        arrays = [_array(t) for t in inputs]
        results = finish([synchronize(h) for h in submit(arrays)])
        return [tf.convert_to_tensor(r) for r in results]

    def submit_op(*arrays: np.ndarray) -> np.ndarray:
        return np.asarray(submit(list(arrays)), dtype=np.int64)

    def wait_op(handles: np.ndarray) -> list[np.ndarray]:
        return finish([synchronize(int(h)) for h in handles])

    # numpy_function names must be unique-ish graph names, not the engine's names.
    op_name = "Horovod" + "".join(part.capitalize() for part in name.replace(".", "_").split("_") if part)[:60]
    handles = tf.numpy_function(submit_op, list(inputs), tf.int64, stateful=True, name=op_name + "Submit")
    outputs = tf.numpy_function(wait_op, [handles], list(out_dtypes), stateful=False, name=op_name + "Wait")
    for output, shape in zip(outputs, out_shapes, strict=True):
        if shape is not None:
            output.set_shape(shape)
    return list(outputs)


def _array(tensor: tf.Tensor) -> np.ndarray:
    """A CPU tensor's memory as a numpy array (no copy for an EagerTensor)."""
    array: np.ndarray = tensor.numpy()
    return array
