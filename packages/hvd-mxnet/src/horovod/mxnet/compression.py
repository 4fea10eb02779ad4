"""Gradient compression applied around allreduce (Horovod's ``hvd.Compression``), for NDArrays."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

# mxnet is untyped: an NDArray is ``Any`` here.
NDArray = Any


class CompressorLike(Protocol):
    """What ``compression=`` takes: a :class:`Compressor` subclass (Horovod's form) or any object
    with these two functions."""

    def compress(self, tensor: NDArray, /) -> tuple[NDArray, Any]: ...

    def decompress(self, tensor: NDArray, ctx: Any, /) -> NDArray: ...


class Compressor:
    """Interface: ``compress`` returns (tensor to send, context); ``decompress`` undoes it."""

    @staticmethod
    def compress(tensor: NDArray) -> tuple[NDArray, Any]:
        raise NotImplementedError

    @staticmethod
    def decompress(tensor: NDArray, ctx: Any) -> NDArray:
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are (the very same NDArray: in-place reductions reach the original)."""

    @staticmethod
    def compress(tensor: NDArray) -> tuple[NDArray, Any]:
        return tensor, None

    @staticmethod
    def decompress(tensor: NDArray, ctx: Any) -> NDArray:
        return tensor


def _is_float(dtype: Any) -> bool:
    # An NDArray's dtype is a numpy scalar type (np.float32), or None for a context we did not make.
    return dtype is not None and np.issubdtype(np.dtype(dtype), np.floating)


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16 (a new NDArray) and casts the result back to the
    original dtype; other dtypes go unchanged."""

    @staticmethod
    def compress(tensor: NDArray) -> tuple[NDArray, Any]:
        dtype = tensor.dtype
        if _is_float(dtype) and np.dtype(dtype) != np.float16:
            tensor = tensor.astype(np.float16)
        return tensor, dtype

    @staticmethod
    def decompress(tensor: NDArray, ctx: Any) -> NDArray:
        if _is_float(ctx) and np.dtype(tensor.dtype) != np.dtype(ctx):
            tensor = tensor.astype(ctx)
        return tensor


class Compression:
    """The compression algorithms DistributedTrainer and allreduce accept."""

    none = NoneCompressor
    fp16 = FP16Compressor


__all__ = ["Compression", "Compressor", "CompressorLike", "FP16Compressor", "NoneCompressor"]
