"""Shared by the test modules: deterministic per-rank inputs and references computed locally.

Every rank can compute every rank's input, so each case checks its result against a reference
it computes by itself. Case functions live at module level in the test modules, so that they can
also be run by a multi-process launcher (horovod.run).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import torch

import horovod.torch as hvd
from horovod.common.testing import run_cluster
from horovod.common.testing.cases import expect_error as expect_error  # shared with hvd-core's suite

ALL_DTYPES = (
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.bool,
)
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
TIMEOUT = 120.0


def cluster(fn: Callable[..., Any], np: int, *args: Any, env: dict | None = None, timeout: float = TIMEOUT) -> list:
    return run_cluster(fn, np, args=args, env=env, timeout=timeout)


def cluster_warnings(fn: Callable[..., Any], np: int, *args: Any) -> tuple[list, list[warnings.WarningMessage]]:
    """Runs a cluster recording warnings (filters are process-wide: recorded around the ranks)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = run_cluster(fn, np, args=args, timeout=TIMEOUT)
    return results, list(caught)


def contribution(rank: int, shape: tuple[int, ...], dtype: torch.dtype, small: bool = False) -> torch.Tensor:
    """Rank `rank`'s input: small integers, exact in every dtype."""
    count = math.prod(shape)
    values = (torch.arange(count, dtype=torch.int64) * 7 + rank * 3) % 5
    if small:  # for products: 1 or 2
        values = values % 2 + 1
    if dtype == torch.bool:
        return (values % 2 == 1).reshape(shape)
    return values.reshape(shape).to(dtype)


def ops_for(dtype: torch.dtype) -> list[int]:
    if dtype == torch.bool:
        return [hvd.Min, hvd.Max, hvd.Product]
    return [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]


def reference(op: int, inputs: list[torch.Tensor], prescale: float = 1.0, postscale: float = 1.0) -> torch.Tensor:
    """What a reduction computes, in float64: scale each input, reduce, scale (Average: / count)."""
    dtype = inputs[0].dtype
    stacked = torch.stack([x.to(torch.float64) for x in inputs])
    if dtype == torch.bool:
        return stacked.amin(0) if op in (hvd.Min, hvd.Product) else stacked.amax(0)
    integer = not dtype.is_floating_point
    stacked = stacked * prescale
    if integer:
        stacked = torch.trunc(stacked)
    reduced = {
        hvd.Sum: lambda: stacked.sum(0),
        hvd.Average: lambda: stacked.sum(0),
        hvd.Min: lambda: stacked.amin(0),
        hvd.Max: lambda: stacked.amax(0),
        hvd.Product: lambda: stacked.prod(0),
    }[op]()
    result = reduced * (postscale / len(inputs) if op == hvd.Average else postscale)
    return torch.trunc(result) if integer else result


def assert_close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    assert isinstance(actual, torch.Tensor), f"{what}: got {type(actual).__name__}"
    assert actual.dtype == dtype, f"{what}: dtype {actual.dtype}, expected {dtype}"
    assert tuple(actual.shape) == tuple(expected.shape), (
        f"{what}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    )
    tolerance = {torch.float16: 1e-2, torch.bfloat16: 2e-2, torch.float32: 1e-5}.get(dtype, 1e-9)
    a, e = actual.to(torch.float64), expected.to(torch.float64)
    assert torch.allclose(a, e, rtol=tolerance, atol=tolerance), (
        f"{what}: got {a.flatten()[:8]}, expected {e.flatten()[:8]}"
    )


def seeded(shape: tuple[int, ...], seed: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """A random tensor every rank can recompute (own generator: the global one is shared by threads)."""
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)
