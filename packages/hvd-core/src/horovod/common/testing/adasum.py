"""A numpy reference of Adasum (op=hvd.Adasum), for the tests of every backend and framework.

The pairwise operation, Horovod's tree over a power of two of ranks (recursive vector halving,
distance doubling: the lower rank of each pair keeps the first half), and hvd's extension to any
rank count (with n = 2^k + m ranks, rank 2^k + i first combines into rank i). Everything is
computed in float64 on whole vectors; the engine computes the same in pieces, so results agree to
rounding (see :func:`assert_close`).
"""

from __future__ import annotations

import math
import sys

import numpy as np

#: Squared norms below this give a coefficient of 1 (the engine's threshold, execution/adasum_math.cc).
SMALLEST_NORM_SQ = math.sqrt(sys.float_info.min)


def pairwise(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Adasum of two vectors: (1 - a.b / (2|a|^2)) a + (1 - a.b / (2|b|^2)) b, in float64.

    :param a: the first vector (any shape; flattened).
    :param b: the second vector, of ``a``'s size.
    """
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    dot, a_sq, b_sq = float(a @ b), float(a @ a), float(b @ b)
    a_coeff = 1.0 if a_sq < SMALLEST_NORM_SQ else 1.0 - dot / (2.0 * a_sq)
    b_coeff = 1.0 if b_sq < SMALLEST_NORM_SQ else 1.0 - dot / (2.0 * b_sq)
    return a_coeff * a + b_coeff * b


def combine(vectors: list[np.ndarray]) -> np.ndarray:
    """Adasum of one tensor's vectors, one per rank in rank order, as hvd combines them: the extra
    ranks past the largest power of two into their partners, then the tree (level by level, pairs
    of ranks ``r`` and ``r ^ level``, the lower one's vector first). Returns float64, flat.

    :param vectors: each rank's tensor (the same size on every rank).
    """
    flat = [np.asarray(v, np.float64).ravel() for v in vectors]
    tree = 1
    while tree * 2 <= len(flat):
        tree *= 2
    held = flat[:tree]
    for i, extra in enumerate(flat[tree:]):
        held[i] = pairwise(held[i], extra)
    level = 1
    while level < tree:
        combined = list(held)
        for r in range(tree):
            if not r & level:  # both of a pair hold the combination, the lower one's vector first
                combined[r] = combined[r | level] = pairwise(held[r], held[r | level])
        held = combined
        level *= 2
    return held[0]


def expected(tensors_by_rank: list[np.ndarray], dtype: np.dtype | None = None) -> np.ndarray:
    """What every rank's allreduce(op=Adasum) of these tensors should give, in their shape and dtype.

    :param tensors_by_rank: each rank's tensor, in rank order.
    :param dtype: the result's dtype (default: the tensors').
    """
    first = np.asarray(tensors_by_rank[0])
    return combine(list(tensors_by_rank)).reshape(first.shape).astype(dtype or first.dtype)


def tolerance(dtype: np.dtype | str) -> float:
    """The relative error of a result of ``dtype`` against :func:`expected`: the engine rounds each
    level's combination to the dtype.

    :param dtype: the tensors' dtype (a numpy dtype, or a name such as ``"bfloat16"``).
    """
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    return {"float64": 1e-12, "float32": 2e-5, "float16": 5e-3, "bfloat16": 4e-2}[name]


def assert_close(actual: np.ndarray, desired: np.ndarray, dtype: np.dtype | str, err_msg: str = "") -> None:
    """``actual`` agrees with ``desired`` (:func:`expected`) within :func:`tolerance`, relative to
    each element and to the largest: where the tree's terms cancel, an element's own rounding
    error is that of the terms, not of what is left of them.

    :param actual: what an allreduce gave.
    :param desired: the reference.
    :param dtype: the tensors' dtype.
    :param err_msg: said when they differ.
    """
    a = np.asarray(actual, np.float64)
    d = np.asarray(desired, np.float64)
    tol = tolerance(dtype)
    scale = float(np.abs(d).max()) if d.size else 0.0
    np.testing.assert_allclose(a, d, rtol=tol, atol=tol * scale, err_msg=err_msg)
