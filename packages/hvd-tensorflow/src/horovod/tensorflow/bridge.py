"""How TensorFlow tensors reach hvd's engine, eagerly and inside graphs.

Nothing here is compiled against TensorFlow: tensors cross as numpy arrays and hvd-core's numpy
collectives submit them to the engine. Eagerly an input is read through the buffer protocol
(``memoryview`` of an EagerTensor; ``.numpy()`` would copy it), and a result becomes a tensor through
DLPack, keeping the engine's output alive, where TensorFlow can use its memory in place (aligned:
every large result is); small unaligned results and bfloat16, which neither protocol carries, are
copied. ``tf.numpy_function`` hands its function views of CPU tensors already.

Eagerly, a collective submits and waits at once. Inside a graph one collective is two ops:

- a *submit* op (stateful) hands every input to the engine and returns the engine's handles at once;
- a *wait* op takes those handles and returns the results.

Why two: a submit never blocks, so the engine sees every collective of a step as soon as its inputs
are ready, and fuses what is in flight together. Several tensors that belong together (a step's
gradients) go through one submit op and one wait op. A wait blocks the thread that runs it until
every rank has submitted that collective; how that can never deadlock two ranks depends on the
kind of graph:

- ``tf.function``: its automatic control dependencies run stateful ops without resource inputs in
  program order, so every rank submits the same collectives in the same order, and the wait is a
  plain op. Whatever the executor does with the waits, the rank that has submitted the fewest
  collectives only ever waits on collectives every rank has submitted, so it goes on.
- ``tf.compat.v1`` graphs: nothing orders the submits (a ``Session.run`` runs whichever subgraph its
  fetches need, in any order), so a wait that held one of the executor's few inter-op threads could
  starve a submit that a peer waits on: rank 0 blocked on A and B with C's submit queued, rank 1
  blocked on C and D with A's submit queued. Measured: 60 independent allreduces in one v1 graph
  hung every run on this 2-core machine. There the wait runs as a ``tf.data`` iterator's
  ``get_next``, which TensorFlow computes on a background thread of the iterator's own, with the
  dataset's function on a private thread pool, never on an inter-op thread: submits always find a
  thread, and the same graph ran every time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from horovod.common.framework_api import NumpyAdapter, synchronize

#: submit(arrays) -> engine handles, one or more per call; finish(results) -> the output arrays.
Submit = Callable[[list[np.ndarray]], list[int]]
Finish = Callable[[list[Any]], list[np.ndarray]]


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
        return [_tensor(r) for r in results]

    def submit_op(*arrays: np.ndarray) -> np.ndarray:
        return np.asarray(submit(list(arrays)), dtype=np.int64)

    def wait_op(handles: np.ndarray) -> list[np.ndarray]:
        return finish([synchronize(int(h)) for h in handles])

    # numpy_function names must be unique-ish graph names, not the engine's names.
    op_name = "Horovod" + "".join(part.capitalize() for part in name.replace(".", "_").split("_") if part)[:60]
    handles = tf.numpy_function(submit_op, list(inputs), tf.int64, stateful=True, name=op_name + "Submit")
    if in_function():
        outputs = tf.numpy_function(wait_op, [handles], list(out_dtypes), stateful=False, name=op_name + "Wait")
    else:
        outputs = _wait_off_the_executor(wait_op, handles, list(out_dtypes), op_name + "Wait")
    for output, shape in zip(outputs, out_shapes, strict=True):
        if shape is not None:
            output.set_shape(shape)
    return list(outputs)


def in_function() -> bool:
    """True while tracing a ``tf.function`` (as opposed to building a tf.compat.v1 graph)."""
    return bool(tf.inside_function())


def blocking(fn: Callable[[], int], name: str) -> tf.Tensor:
    """A scalar int32 from ``fn()``, an operation that blocks until its peers reach it (join,
    barrier): called now when eager; in a graph, when the graph runs, off the executor's inter-op
    threads in tf.compat.v1 graphs as waits are."""
    if not in_graph():
        return tf.constant(fn(), dtype=tf.int32)

    def call(*_: np.ndarray) -> list[np.ndarray]:
        return [np.int32(fn())]

    if in_function():
        result = tf.numpy_function(call, [], [tf.int32], stateful=True, name=name)[0]
    else:
        result = _wait_off_the_executor(call, tf.zeros([0], tf.int64), [tf.int32], name)[0]
    result.set_shape([])
    return result


def _wait_off_the_executor(
    wait_op: Callable[[np.ndarray], list[np.ndarray]], handles: tf.Tensor, dtypes: list[tf.DType], name: str
) -> list[tf.Tensor]:
    """The wait of a tf.compat.v1 graph: ``wait_op(handles)`` run by a one-element dataset, whose
    iterator is made anew from this run's handles and read at once (see the module's docstring)."""
    with tf.name_scope(name):
        dataset = tf.data.Dataset.from_tensors(handles).map(
            lambda h: tuple(tf.numpy_function(wait_op, [h], dtypes, stateful=True))
        )
        # The dataset's functions run on a thread of its own: by default tf.data runs them on the
        # session's inter-op threads, where a blocking wait would starve submits again. No prefetch
        # or autotuning: one element, read at once, needs no more threads (measured: a v1 step of
        # 90 such waits ran in a third of the time, and its session closed 10 times faster).
        options = tf.data.Options()
        options.threading.private_threadpool_size = 1
        options.experimental_optimization.inject_prefetch = False
        options.autotune.enabled = False
        dataset = dataset.with_options(options)
        iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
        with tf.control_dependencies([iterator.initializer]):
            return list(iterator.get_next())


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
