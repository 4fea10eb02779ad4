"""DistributedOptimizer's compression of gradients, with Compression.fp16's float16 copies kept.

``Compression.fp16`` casts each gradient to a new float16 tensor and its result back to a new
tensor of the gradient's dtype, every step: two allocations of the gradient's size, whose pages the
allocator hands back and takes again. Here each parameter's float16 copy is kept between steps and
written in place, and the result is cast straight into the gradient's own storage. The values are
the same bits (``copy_`` rounds as ``type()`` does); the allocations cost more than the casts
(benchmarks/results/run-32-half-precision-paired.md). Any other compression runs as given.
"""

from __future__ import annotations

from typing import Any

import torch
from horovod.torch.compression import Compression, CompressorLike


class KeptCompression:
    """``compression``, applied to one parameter's gradient at a time (:meth:`compress` before its
    allreduce, :meth:`write_result` after)."""

    def __init__(self, compression: CompressorLike) -> None:
        self.compression = compression
        self._fp16 = compression is Compression.fp16
        self._kept: dict[torch.Tensor, torch.Tensor] = {}  # parameter -> its gradient's float16 copy

    def compress(self, p: torch.Tensor, grad: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """What to allreduce for parameter ``p``'s (dense) gradient ``grad``, and the context."""
        if not (self._fp16 and grad.dtype.is_floating_point and grad.dtype != torch.float16):
            return self.compression.compress(grad)
        kept = self._kept.get(p)
        if kept is None or kept.shape != grad.shape or kept.device != grad.device:
            kept = self._kept[p] = torch.empty_like(grad, dtype=torch.float16, memory_format=torch.contiguous_format)
        kept.copy_(grad)
        return kept, grad.dtype

    def decompress(self, output: torch.Tensor, ctx: Any) -> torch.Tensor:
        """The allreduce's ``output`` back in the gradient's form (a new tensor)."""
        return self.compression.decompress(output, ctx)

    def write_result(self, grad: torch.Tensor, output: torch.Tensor, ctx: Any) -> None:
        """Makes the dense gradient ``grad`` the allreduce's ``output``, decompressed."""
        if self._fp16 and output.dtype != grad.dtype and output.shape == grad.shape:
            grad.copy_(output)  # cast into the gradient's own storage
            return
        value = self.compression.decompress(output, ctx)
        if value is not grad:  # e.g. another compression's new tensor: take the result's storage
            grad.set_(value)  # type: ignore[call-overload]  # torch's stub omits set_(Tensor), which it documents
