"""Gradient compression applied around allreduce (Horovod's ``hvd.Compression``)."""

from __future__ import annotations

from typing import Any, Protocol

import torch


class CompressorLike(Protocol):
    """What ``compression=`` takes: a :class:`Compressor` subclass (Horovod's form) or any object
    with these two functions."""

    def compress(self, tensor: torch.Tensor, /) -> tuple[torch.Tensor, Any]: ...

    def decompress(self, tensor: torch.Tensor, ctx: Any, /) -> torch.Tensor: ...


class Compressor:
    """Interface: ``compress`` returns (tensor to send, context); ``decompress`` undoes it."""

    @staticmethod
    def compress(tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
        raise NotImplementedError

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx: Any) -> torch.Tensor:
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are."""

    @staticmethod
    def compress(tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
        return tensor, None

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx: Any) -> torch.Tensor:
        return tensor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16 and casts the result back; other dtypes unchanged."""

    @staticmethod
    def compress(tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
        dtype = tensor.dtype
        if dtype.is_floating_point and dtype != torch.float16:
            tensor = tensor.type(torch.float16)
        return tensor, dtype

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx: Any) -> torch.Tensor:
        dtype = ctx
        if dtype is not None and dtype.is_floating_point and tensor.dtype != dtype:
            tensor = tensor.type(dtype)
        return tensor


class Compression:
    """The compression algorithms DistributedOptimizer and allreduce accept."""

    none = NoneCompressor
    fp16 = FP16Compressor
