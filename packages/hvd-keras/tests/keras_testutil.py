"""Shared by hvd-keras's tests: Keras ranks as processes on Gloo, one job per backend and rank
count (hvd-core's batch kit), and the data every rank can compute for itself."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

import numpy as np
import pytest

from horovod.common.testing import batch
from horovod.common.testing.batch import Call, Outcomes

RANK_ENV = {
    "HOROVOD_CPU_OPERATIONS": "gloo",
    "OMP_NUM_THREADS": "1",
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "HOROVOD_DYNAMIC_PROCESS_SETS": "1",  # a case adds a process set
    # A case that fails on one rank part-way leaves its peers waiting on a collective it never
    # submits: the stall shutdown turns that into an error on every rank instead of a hang.
    "HOROVOD_STALL_CHECK_TIME_SECONDS": "10",
    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "30",
}


def backend(name: str, *more: object) -> object:
    """A test parameter for Keras on ``name`` ("tensorflow" or "torch"; with ``more``, the tuple
    ``(name, *more)``), skipped where that framework is not installed: the package matrix's cells
    without torch (devtools/matrix.toml), where PyPI has only CUDA builds of it."""
    missing = importlib.util.find_spec(name) is None
    reason = f"{name} is not installed here (a package-matrix cell without it)"
    return pytest.param((name, *more) if more else name, marks=pytest.mark.skipif(missing, reason=reason))


BACKENDS = [backend("tensorflow"), backend("torch")]


def run_batch(calls: Sequence[Call], np_: int, backend: str) -> Outcomes:
    """Every call in one job of ``np_`` ranks with Keras on ``backend`` ("tensorflow" or "torch")."""
    return batch.run_batch(calls, np_, {**RANK_ENV, "KERAS_BACKEND": backend}, setup=one_thread)


def one_thread() -> None:
    """One intra-op thread per rank (ranks share this machine's cores), for either backend."""
    import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
    else:
        import torch

        torch.set_num_threads(1)


def dataset(rows: int, seed: int = 1234) -> tuple[np.ndarray, np.ndarray]:
    """Inputs of 6 features and targets of 2, the same on every rank for a given seed."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 6)).astype(np.float32)
    y = np.stack([np.sin(x[:, 0]) + x[:, 1], x[:, 2] * x[:, 3]], axis=1).astype(np.float32)
    return x, y


def shard(data: np.ndarray, rank: int, size: int, batch: int) -> np.ndarray:
    """The rows rank ``rank`` trains on: its ``batch`` rows of every step of ``size * batch`` rows."""
    steps = len(data) // (size * batch)
    return np.concatenate([data[(s * size + rank) * batch : (s * size + rank + 1) * batch] for s in range(steps)])


__all__ = ["Call", "Outcomes", "dataset", "one_thread", "run_batch", "shard"]
