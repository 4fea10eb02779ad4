"""hvd.Compression: none and fp16, alone and around collectives."""

from __future__ import annotations

import torch

import horovod.torch as hvd
from hvdtorch_testutil import cluster, seeded


def test_none_is_the_identity() -> None:
    t = torch.arange(4.0)
    compressed, ctx = hvd.Compression.none.compress(t)
    assert compressed is t and hvd.Compression.none.decompress(compressed, ctx) is t


def test_fp16_round_trip() -> None:
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        t = seeded((3, 5), seed=1).to(dtype)
        compressed, ctx = hvd.Compression.fp16.compress(t)
        assert compressed.dtype == torch.float16
        restored = hvd.Compression.fp16.decompress(compressed, ctx)
        assert restored.dtype == dtype and restored.shape == t.shape
        assert torch.allclose(restored.double(), t.double(), atol=1e-2, rtol=1e-3)
    for t in (torch.arange(5), torch.ones(2, dtype=torch.bool), torch.ones(2, dtype=torch.float16)):
        compressed, ctx = hvd.Compression.fp16.compress(t)
        assert compressed.dtype == t.dtype  # integers, bools and float16 travel as they are
        assert torch.equal(hvd.Compression.fp16.decompress(compressed, ctx), t)


def case_collectives_with_compression() -> None:
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    fp16 = hvd.Compression.fp16
    x = torch.full((4,), 0.5 + rank, dtype=torch.float64)
    total = sum(0.5 + r for r in range(n))
    result = hvd.allreduce(x, op=hvd.Sum, compression=fp16, name="c.ar")
    assert result.dtype == torch.float64 and result.tolist() == [total] * 4
    results = hvd.grouped_allreduce([x, torch.arange(3)], op=hvd.Sum, compression=fp16, name="c.gar")
    assert results[0].dtype == torch.float64 and results[1].tolist() == [0, n, 2 * n]
    scattered = hvd.reducescatter(torch.ones(n, 2), op=hvd.Sum, compression=fp16, name="c.rs")
    assert scattered.dtype == torch.float32 and scattered.tolist() == [[float(n)] * 2]
    scattered = hvd.grouped_reducescatter([torch.ones(n, 2)], op=hvd.Sum, compression=fp16, name="c.grs")
    assert scattered[0].dtype == torch.float32 and scattered[0].tolist() == [[float(n)] * 2]


def test_collectives_with_compression() -> None:
    cluster(case_collectives_with_compression, 3)
