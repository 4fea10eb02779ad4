"""Adasum (op=hvd.Adasum) cases of the conformance suite, checked against the numpy reference
(:mod:`horovod.common.testing.adasum`) on every rank: each dtype, sizes that split unevenly down
the tree, orthogonal and parallel vectors, tiny and huge magnitudes, a zero vector, fused groups,
scaling, a process set, and what cannot apply."""

from __future__ import annotations

import numpy as np

import horovod.common as hvd
from horovod.common import dtypes
from horovod.common.exceptions import UnsupportedOperationError
from horovod.common.testing.adasum import assert_close, expected
from horovod.common.testing.cases import expect_error
from horovod.common.testing.probes import job_topology

SIZES = (1, 2, 5, 1000, 70_001)
#: Per dtype, magnitudes far from 1 that the dtype still holds with room for the norms' squares in double.
MAGNITUDES = {"float16": (1e-2, 1e2), "bfloat16": (1e-20, 1e20), "float32": (1e-20, 1e20), "float64": (1e-150, 1e150)}


def vector(rank: int, size: int, seed: int, dtype: str, scale: float = 1.0) -> np.ndarray:
    """Rank ``rank``'s input: reproducible on every rank, so each can compute the expected result."""
    values = np.random.default_rng(seed * 1000 + rank).standard_normal(size) * scale
    return values.astype(dtypes.from_name(dtype))


def check(name: str, inputs: list[np.ndarray], got: np.ndarray, dtype: str, want: np.ndarray | None = None) -> None:
    """``got`` agrees with the reference, and is the same bits on every rank (an allgather of it)."""
    want = expected(inputs) if want is None else want
    assert got.dtype == inputs[0].dtype and got.shape == inputs[0].shape, (name, got.dtype, got.shape)
    assert_close(got, want, dtype, name)
    every = hvd.allgather(got.reshape(1, -1).view(np.uint8), name=f"{name}.bits")
    assert (every == every[0]).all(), f"{name}: the ranks' results differ"


def case_adasum(dtype_names: tuple[str, ...]) -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    for dtype in dtype_names:
        for seed, size in enumerate(SIZES):
            inputs = [vector(r, size, seed, dtype) for r in range(n)]
            check(
                f"ada.{dtype}.{size}",
                inputs,
                hvd.allreduce(inputs[rank], op=hvd.Adasum, name=f"ada.{dtype}.{size}"),
                dtype,
            )
        for scale in MAGNITUDES[dtype]:
            inputs = [vector(r, 300, 7, dtype, scale) for r in range(n)]
            got = hvd.allreduce(inputs[rank], op=hvd.Adasum, name=f"ada.{dtype}.scale{scale:g}")
            check(f"ada.{dtype}.scale{scale:g}", inputs, got, dtype)
        # Orthogonal vectors add up; parallel ones average (pairwise, down the tree).
        basis = np.eye(max(n, 4), dtype=dtypes.from_name(dtype))
        got = hvd.allreduce(basis[rank] * (rank + 1), op=hvd.Adasum, name=f"ada.{dtype}.orthogonal")
        check(
            f"ada.{dtype}.orthogonal",
            [basis[r] * (r + 1) for r in range(n)],
            got,
            dtype,
            want=sum(basis[r] * (r + 1) for r in range(n)),
        )
        parallel = [np.full(6, 2.0, dtypes.from_name(dtype))] * n
        got = hvd.allreduce(parallel[rank], op=hvd.Adasum, name=f"ada.{dtype}.parallel")
        check(f"ada.{dtype}.parallel", parallel, got, dtype, want=parallel[0])
    # A zero vector (as a rank without a gradient gives) leaves the others' combination.
    inputs = [vector(r, 50, 3, "float64") * (r != n - 1) for r in range(n)]
    check("ada.zero", inputs, hvd.allreduce(inputs[rank], op=hvd.Adasum, name="ada.zero"), "float64")


def case_adasum_groups_and_scaling() -> None:
    """A fused group: each tensor is a vector of its own (its own coefficients); prescale and
    postscale around the combination."""
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    shapes = [(3,), (40, 25), (17,), (4096,)]
    inputs = [[vector(r, int(np.prod(s)), i, "float32").reshape(s) for r in range(n)] for i, s in enumerate(shapes)]
    results = hvd.grouped_allreduce([each[rank] for each in inputs], op=hvd.Adasum, name="ada.group")
    for i, (result, each) in enumerate(zip(results, inputs, strict=True)):
        check(f"ada.group.{i}", each, result, "float32")
    # Separate small tensors in one cycle are fused by the engine: the same per-tensor results.
    handles = [hvd.allreduce_async(each[rank], op=hvd.Adasum, name=f"ada.fused.{i}") for i, each in enumerate(inputs)]
    for i, (handle, each) in enumerate(zip(handles, inputs, strict=True)):
        check(f"ada.fused.{i}", each, hvd.synchronize(handle), "float32")
    inputs64 = [vector(r, 100, 11, "float64") for r in range(n)]
    got = hvd.allreduce(inputs64[rank], op=hvd.Adasum, prescale_factor=0.5, postscale_factor=3.0, name="ada.scaled")
    check("ada.scaled", inputs64, got, "float64", want=expected([x * 0.5 for x in inputs64]) * 3.0)


def case_adasum_process_set() -> None:
    """Adasum over a process set: its members (in set order) are the tree."""
    n = job_topology().size
    members = list(range(1, n)) if n > 2 else list(range(n))
    subset = hvd.ProcessSet(members)
    hvd.init(process_sets=[subset] if len(members) < n else [])
    rank = hvd.rank()
    if rank not in members:
        hvd.barrier()
        return
    ps = subset if len(members) < n else hvd.global_process_set
    inputs = [vector(r, 999, 5, "float32") for r in members]
    got = hvd.allreduce(inputs[members.index(rank)], op=hvd.Adasum, process_set=ps, name="ada.set")
    assert_close(got, expected(inputs), "float32")
    hvd.barrier()


def case_adasum_refusals() -> None:
    """What Adasum cannot combine is refused at the call, naming it, on every rank."""
    hvd.init()
    n = hvd.size()
    expect_error(ValueError, ("Adasum", "int32"), lambda: hvd.allreduce(np.ones(3, np.int32), op=hvd.Adasum))
    expect_error(ValueError, ("Adasum", "bool"), lambda: hvd.allreduce(np.ones(3, bool), op=hvd.Adasum))
    expect_error(
        UnsupportedOperationError,
        ("reducescatter", "Adasum"),
        lambda: hvd.reducescatter(np.ones((n, 2)), op=hvd.Adasum),
    )
    hvd.barrier()
