"""Shared by the test modules: ranks as processes, deterministic inputs, references computed locally.

Every case is a module-level function run on every rank by ``horovod.run`` (ranks are separate
processes on Gloo, as users run them: collectives complete on MXNet's engine threads and hvd's
completer thread, which need the process's Horovod instance). Every rank can compute every rank's
input, so each case checks its results against references it computes by itself.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from horovod.common.testing import batch
from horovod.common.testing.batch import Call, Outcomes
from horovod.common.testing.cases import contribution, ops_for, reference  # noqa: F401  (re-exported for the cases)

RANK_ENV = {
    "HOROVOD_CPU_OPERATIONS": "gloo",
    "OMP_NUM_THREADS": "1",
    "MXNET_CPU_WORKER_NTHREADS": "1",
    "HOROVOD_DYNAMIC_PROCESS_SETS": "1",
    # A case that fails on one rank part-way leaves its peers waiting on a collective it never
    # submits: the stall shutdown turns that into an error on every rank instead of a hang.
    "HOROVOD_STALL_CHECK_TIME_SECONDS": "10",
    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "30",
}
# Every dtype MXNet 1.9.1 has on CPU.
ALL_DTYPES = ("uint8", "int8", "int32", "int64", "float16", "float32", "float64", "bool")
NUMERIC_DTYPES = tuple(d for d in ALL_DTYPES if d != "bool")


def run_batch(calls: Sequence[Call], np_: int, env: dict[str, str] | None = None) -> Outcomes:
    """Every call in one job of ``np_`` MXNet ranks (one launch and one MXNet import for all)."""
    return batch.run_batch(calls, np_, {**RANK_ENV, **(env or {})}, setup=import_mxnet)


def import_mxnet() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import mxnet as mx
    return mx


def nd(array: np.ndarray) -> Any:
    """An NDArray of ``array``'s dtype (mx.nd.array alone would make float64 float32)."""
    return import_mxnet().nd.array(array, dtype=array.dtype)


def assert_close(actual: Any, expected: np.ndarray, dtype: str, what: str) -> None:
    mx = import_mxnet()
    assert isinstance(actual, mx.nd.NDArray), f"{what}: got {type(actual).__name__}"
    assert np.dtype(actual.dtype) == np.dtype(dtype), f"{what}: dtype {np.dtype(actual.dtype)}, expected {dtype}"
    assert tuple(actual.shape) == tuple(expected.shape), f"{what}: shape {actual.shape}, expected {expected.shape}"
    tolerance = {"float16": 1e-2, "float32": 1e-5}.get(dtype, 1e-9)
    got = actual.asnumpy().astype(np.float64)
    assert np.allclose(got, expected.astype(np.float64), rtol=tolerance, atol=tolerance), (
        f"{what}: got {got.ravel()[:8]}, expected {expected.ravel()[:8]}"
    )


def pointer(array: Any) -> int:
    from horovod.mxnet.adapter import data_ptr

    array.wait_to_read()
    return data_ptr(array)


__all__ = ["ALL_DTYPES", "NUMERIC_DTYPES", "Call", "Outcomes", "run_batch"]
