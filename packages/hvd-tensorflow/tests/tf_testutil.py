"""Shared by the test modules: ranks as processes, the three execution modes, local references.

Every case is a module-level function run on every rank by ``horovod.run`` (ranks are separate
processes on Gloo, as users run them: TensorFlow's graph ops call back on TensorFlow's threads, which
need the process's Horovod instance). Every rank can compute every rank's input, so each case
checks its results against references it computes by itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from horovod.common.testing import batch
from horovod.common.testing.batch import Call, Outcomes

RANK_ENV = {
    "HOROVOD_CPU_OPERATIONS": "gloo",
    "OMP_NUM_THREADS": "1",
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "HOROVOD_DYNAMIC_PROCESS_SETS": "1",
    # A case that fails on one rank part-way leaves its peers waiting on a collective it never
    # submits: the stall shutdown turns that into an error on every rank instead of a hang.
    "HOROVOD_STALL_CHECK_TIME_SECONDS": "10",
    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "30",
}
MODES = ("eager", "function", "graph")
ALL_DTYPES = ("uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64", "bool")


def run_batch(calls: Sequence[Call], np_: int) -> Outcomes:
    """Every call in one job of ``np_`` TensorFlow ranks (one launch and one TensorFlow import for all)."""
    return batch.run_batch(calls, np_, RANK_ENV, setup=_one_intra_op_thread)


def _one_intra_op_thread() -> None:
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)


def tf_dtype(name: str) -> Any:
    import tensorflow as tf

    return tf.dtypes.as_dtype(name)


def contribution(rank: int, shape: tuple[int, ...], dtype: str, small: bool = False) -> np.ndarray:
    """Rank ``rank``'s input: small integers, exact in every dtype (as numpy, of TF's dtype)."""
    count = int(np.prod(shape)) if shape else 1
    values = (np.arange(count) * 7 + rank * 3) % 5
    if small:  # for products: 1 or 2
        values = values % 2 + 1
    if dtype == "bool":
        return np.asarray(values % 2 == 1).reshape(shape)
    return values.reshape(shape).astype(tf_dtype(dtype).as_numpy_dtype)


def reduce_reference(op: str, inputs: list[np.ndarray], prescale: float = 1.0, postscale: float = 1.0) -> np.ndarray:
    """What a reduction computes, in float64: scale each input, reduce, scale (Average: / count)."""
    if inputs[0].dtype == bool:
        stacked = np.stack(inputs)
        return np.asarray(stacked.all(0) if op in ("Min", "Product") else stacked.any(0), dtype=np.float64)
    integer = np.issubdtype(inputs[0].dtype, np.integer)
    wide = [x.astype(np.float64) * prescale for x in inputs]
    if integer:
        wide = [np.trunc(w) for w in wide]
    stacked = np.stack(wide)
    reduced = {
        "Sum": stacked.sum(0),
        "Average": stacked.sum(0),
        "Min": stacked.min(0),
        "Max": stacked.max(0),
        "Product": stacked.prod(0),
    }[op]
    result = reduced * (postscale / len(inputs) if op == "Average" else postscale)
    return np.trunc(result) if integer else result


def assert_close(actual: Any, expected: np.ndarray, dtype: str, what: str) -> None:
    actual = np.asarray(actual)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, expected {expected.shape}"
    assert actual.dtype == tf_dtype(dtype).as_numpy_dtype, f"{what}: dtype {actual.dtype}, expected {dtype}"
    tolerance = {"float16": 1e-2, "bfloat16": 2e-2, "float32": 1e-5}.get(dtype, 1e-9)
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    assert np.allclose(a, e, rtol=tolerance, atol=tolerance), f"{what}: got {a.ravel()[:8]}, expected {e.ravel()[:8]}"


def run_in_mode(mode: str, build: Callable[..., Any], *inputs: np.ndarray) -> Any:
    """``build(*tensors)`` run eagerly, as one tf.function (called twice: traced once, run twice),
    or as one tf.compat.v1 graph in a Session; returns its outputs as numpy (nested as built)."""
    import tensorflow as tf

    if mode == "eager":
        return tf.nest.map_structure(_numpy, build(*[tf.constant(x) for x in inputs]))
    if mode == "function":
        fn = tf.function(build)
        tensors = [tf.constant(x) for x in inputs]
        first = tf.nest.map_structure(_numpy, fn(*tensors))
        second = tf.nest.map_structure(_numpy, fn(*tensors))
        assert fn.experimental_get_tracing_count() == 1, "the tf.function was traced more than once"
        tf.nest.map_structure(_same, first, second)
        return second
    assert mode == "graph", mode
    with tf.Graph().as_default():
        outputs = build(*[tf.constant(x) for x in inputs])
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            return session.run(outputs)


def _numpy(value: Any) -> Any:
    return value.numpy() if hasattr(value, "numpy") else value


def _same(a: Any, b: Any) -> None:
    assert np.array_equal(np.asarray(a), np.asarray(b)), "a second run of the tf.function gave other results"


def expected_error_types() -> tuple[type[BaseException], ...]:
    """What a collective's failure raises: hvd's errors eagerly, TensorFlow's OpError from a graph
    (the message is hvd's)."""
    import tensorflow as tf

    import horovod.tensorflow as hvd

    return (hvd.CollectiveMismatchError, RuntimeError, ValueError, tf.errors.OpError)
