"""allreduce_buffers: the engine's fused and scaled allreduces, inside NCCL where it can.

An average is ncclAvg, another factor on floating-point tensors a PreMulSum op (made, used, and
destroyed); what NCCL cannot scale exactly as the engine would is declined before anything is
queued, on every member alike. The fake's log shows the op each call used.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import _abi


def fused(comm: _abi.Comm, dtype: str, op: int, postscale: float, counts=(3, 0, 5)) -> tuple[int, list[np.ndarray]]:
    """allreduce_buffers over tensors of `counts` elements (member r holds r + 1 + i % 4 at i)."""
    np_dtype = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "int32": np.int32}[dtype]
    inputs = [((np.arange(n) % 4) + comm.rank + 1).astype(np_dtype) for n in counts]
    addresses = [comm.upload(x) for x in inputs]
    rc = comm.allreduce_buffers([(a, a, n) for a, n in zip(addresses, counts, strict=True)], dtype, op, postscale)
    return rc, [comm.download(a, x) for a, x in zip(addresses, inputs, strict=True)]


def expected(size: int, counts=(3, 0, 5), scale: float = 1.0) -> list[np.ndarray]:
    return [sum(((np.arange(n) % 4) + r + 1).astype(np.float64) for r in range(size)) * scale for n in counts]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_an_average_is_nccl_avg(backend, device, fake, dtype: str) -> None:
    def member(comm: _abi.Comm) -> None:
        rc, got = fused(comm, dtype, _abi.SUM, 1.0 / comm.size)
        assert rc == _abi.OK, comm.last_error
        for g, e in zip(got, expected(comm.size, scale=1.0 / comm.size), strict=True):
            np.testing.assert_allclose(g.astype(np.float64), e, rtol=1e-2)

    _abi.run_members(backend, device, 4, member)
    calls = [c for c in fake.log() if c.startswith("ncclAllReduce")]
    # Two tensors with data per member (the empty one is skipped), all with ncclAvg, in one group.
    assert len(calls) == 8 and all("op=avg" in c for c in calls), calls


def test_another_factor_is_a_pre_mul_sum_op_made_and_destroyed(backend, device, fake) -> None:
    def member(comm: _abi.Comm) -> None:
        rc, got = fused(comm, "float32", _abi.SUM, 0.25)
        assert rc == _abi.OK, comm.last_error
        for g, e in zip(got, expected(comm.size, scale=0.25), strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-6)

    _abi.run_members(backend, device, 3, member)
    calls = fake.log()
    assert sum(c.startswith("ncclRedOpCreatePreMulSum") and "scalar=0.25" in c for c in calls) == 3, calls
    assert sum(c.startswith("ncclRedOpDestroy") for c in calls) == 3, calls
    assert all("op=premulsum" in c for c in calls if c.startswith("ncclAllReduce"))


def test_no_factor_is_a_plain_sum(backend, device, fake) -> None:
    def member(comm: _abi.Comm) -> None:
        rc, got = fused(comm, "int32", _abi.SUM, 1.0)
        assert rc == _abi.OK, comm.last_error
        for g, e in zip(got, expected(comm.size), strict=True):
            np.testing.assert_array_equal(g, e.astype(np.int32))

    _abi.run_members(backend, device, 2, member)
    assert all("op=sum" in c for c in fake.log() if c.startswith("ncclAllReduce"))


@pytest.mark.parametrize(("dtype", "op", "postscale"), [("int32", _abi.SUM, 0.5), ("float32", _abi.MAX, 0.5)])
def test_what_nccl_cannot_scale_is_declined_before_anything_is_queued(
    backend, device, fake, dtype: str, op: int, postscale: float
) -> None:
    def member(comm: _abi.Comm) -> None:
        rc, _ = fused(comm, dtype, op, postscale)
        assert rc == _abi.UNSUPPORTED  # the engine then calls allreduce and scales itself
        assert comm.async_error() == _abi.OK  # declining is no failure

    _abi.run_members(backend, device, 2, member)
    assert not any(c.startswith(("ncclAllReduce", "ncclCommInit")) for c in fake.log())
