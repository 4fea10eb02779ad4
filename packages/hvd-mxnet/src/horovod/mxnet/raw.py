"""NDArrays seen as raw memory by hvd's engine, inside an operation of MXNet's engine.

The collectives that run in MXNet's engine (see :mod:`horovod.mxnet.engine`) submit to hvd once
MXNet has finished the producers of their inputs: then each array is an address, a byte count, a
dtype code and a shape. This adapter lets :class:`horovod.common.framework_api.Collectives` submit
those (same-shape results go straight into the output array's memory; engine-allocated ones come
back as numpy arrays over the engine's buffer, copied into the output array by the caller).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from horovod.common.framework_api import DEVICE_CPU
from horovod.mxnet.adapter import data_ptr, dtype_code, engine_result, nbytes

__all__ = ["Raw", "RawAdapter"]


class Raw:
    """One NDArray's memory, and where a same-shape result goes (``output``; None: in place or
    engine-allocated)."""

    __slots__ = ("address", "code", "dtype", "nbytes", "output", "shape")

    def __init__(self, array: Any, output: Any = None) -> None:
        self.address = data_ptr(array)
        self.nbytes = nbytes(array)
        self.dtype = np.dtype(array.dtype)
        self.code = dtype_code(self.dtype)
        self.shape = tuple(array.shape)
        self.output = Raw(output) if output is not None else None


class RawAdapter:
    """The :class:`horovod.common.framework_api.TensorAdapter` over :class:`Raw` memory."""

    def prepare(self, tensor: Raw) -> Raw:
        return tensor

    def describe(self, tensor: Raw) -> tuple[int, tuple[int, ...], int]:
        return tensor.code, tensor.shape, DEVICE_CPU

    def buffer(self, tensor: Raw) -> tuple[int, int]:
        return tensor.address, tensor.nbytes

    def empty_like(self, tensor: Raw) -> Raw:
        # The output NDArray the caller allocated: the engine writes the result there directly.
        assert tensor.output is not None, "a same-shape collective needs its output array"
        return tensor.output

    def from_engine(self, core_handle: Any, like: Raw) -> np.ndarray[Any, Any]:
        return engine_result(core_handle, like.dtype)

    def copy_into(self, target: Raw, source: Raw) -> Raw:
        raise AssertionError("Raw tensors are used in place as they are: nothing is copied back")
