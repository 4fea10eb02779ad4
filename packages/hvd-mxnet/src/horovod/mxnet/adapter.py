"""How MXNet NDArrays meet hvd's engine: checks, raw memory, and engine results as NDArrays.

An NDArray crosses without a copy: CPU NDArrays of default storage are always contiguous (MXNet
copies for any other slicing; axis-0 slices and reshapes are views that carry their offset), so the
engine reads and writes the memory at the address ``MXNDArrayGetData`` gives. Sparse storage
(``row_sparse``, ``csr``) and other devices are refused with an error saying what to do.

Results the engine allocates (allgather, alltoall) become NDArrays that share the engine's buffer
(``mx.nd.from_numpy(..., zero_copy=True)``); int8, which that function refuses, is copied once.
"""

from __future__ import annotations

import ctypes
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from horovod.common.framework_api import DEVICE_CPU, DTYPE_CODES

with warnings.catch_warnings():
    # MXNet 1.9.1 touches numpy aliases that numpy 1.23 deprecates (np.bool...) while importing.
    warnings.simplefilter("ignore", DeprecationWarning)
    import mxnet as mx
    from mxnet.base import _LIB, check_call

__all__ = [
    "SUPPORTED_DTYPES",
    "_LIB",
    "MXNetAdapter",
    "check_call",
    "check_ndarray",
    "data_ptr",
    "dtype_code",
    "mx",
    "to_ndarray",
]

# MXNet's CPU dtypes (int16 and the unsigned types above uint8 do not exist in MXNet 1.x; bfloat16
# NDArrays cannot be created on CPU), each with the engine's code.
SUPPORTED_DTYPES: tuple[str, ...] = ("float16", "float32", "float64", "uint8", "int8", "int32", "int64", "bool")
_CODES: dict[np.dtype[Any], int] = {np.dtype(name): DTYPE_CODES[name] for name in SUPPORTED_DTYPES}

_NO_ZERO_COPY = {np.dtype("int8")}  # mx.nd.from_numpy(zero_copy=True) says "int8 is not supported"


def dtype_code(dtype: Any) -> int:
    """The engine's code for an MXNet dtype; ValueError naming it and the supported ones otherwise."""
    code = _CODES.get(np.dtype(dtype))
    if code is None:
        raise ValueError(
            f"dtype {np.dtype(dtype).name} is not supported by hvd collectives on MXNet "
            f"(supported: {', '.join(SUPPORTED_DTYPES)})"
        )
    return code


def check_ndarray(tensor: object, what: str) -> Any:
    """``tensor`` if the engine can use its memory as it is; TypeError or ValueError saying why not."""
    if not isinstance(tensor, mx.nd.NDArray):
        raise TypeError(f"{what} expects an mxnet.nd.NDArray, got {type(tensor).__name__}")
    if tensor.stype != "default":
        raise ValueError(f"{what} does not support {tensor.stype} NDArrays; convert with .tostype('default') first")
    if tensor.context.device_type != "cpu":
        raise ValueError(
            f"{what} supports CPU NDArrays only (got one on {tensor.context}); copy it with .as_in_context(mx.cpu())"
        )
    dtype_code(tensor.dtype)
    return tensor


def data_ptr(tensor: Any) -> int:
    """The address of an NDArray's first element (its offset into a shared buffer included).

    Only valid while no operation of MXNet's engine writes the array (inside an engine function
    that holds it, or after ``wait_to_read``)."""
    pointer = ctypes.c_void_p()
    check_call(_LIB.MXNDArrayGetData(tensor.handle, ctypes.byref(pointer)))
    address: int = pointer.value or 0
    return address


def nbytes(tensor: Any) -> int:
    return int(tensor.size) * int(np.dtype(tensor.dtype).itemsize)


def numpy_view(tensor: Any) -> np.ndarray[Any, Any]:
    """A writable numpy array over an NDArray's memory (same validity rule as :func:`data_ptr`)."""
    dtype = np.dtype(tensor.dtype)
    count = int(tensor.size)
    if count == 0:
        return np.empty(tensor.shape, dtype)
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(data_ptr(tensor))
    view: np.ndarray[Any, Any] = np.frombuffer(raw, dtype=dtype).reshape(tensor.shape)
    return view


def to_ndarray(array: np.ndarray[Any, Any]) -> Any:
    """An NDArray over ``array``'s memory (a copy for dtypes MXNet cannot share: int8)."""
    if array.dtype in _NO_ZERO_COPY or array.size == 0 or not array.flags.c_contiguous:
        return mx.nd.array(array, dtype=array.dtype)
    return mx.nd.from_numpy(array, zero_copy=True)


def engine_result(core_handle: Any, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """A completed handle's engine-allocated result as a numpy array sharing the engine's buffer."""
    shape: Sequence[int] = core_handle.output_shape
    output = core_handle.output(raw=True)
    if output is None:
        return np.empty(shape, dtype)
    array: np.ndarray[Any, Any] = np.asarray(output).view(dtype).reshape(shape)
    return array


class MXNetAdapter:
    """The :class:`horovod.common.framework_api.TensorAdapter` for the synchronous collectives.

    ``prepare`` waits until MXNet's engine has finished writing the array (its pending producers),
    so the engine then reads settled memory; results come back as NDArrays (see the module doc).
    """

    def prepare(self, tensor: object) -> Any:
        checked = check_ndarray(tensor, "this collective")
        checked.wait_to_read()
        return checked

    def describe(self, tensor: Any) -> tuple[int, tuple[int, ...], int]:
        return dtype_code(tensor.dtype), tuple(tensor.shape), DEVICE_CPU

    def buffer(self, tensor: Any) -> tuple[int, int]:
        return data_ptr(tensor), nbytes(tensor)

    def empty_like(self, tensor: Any) -> Any:
        return mx.nd.empty(tensor.shape, ctx=tensor.context, dtype=tensor.dtype)

    def from_engine(self, core_handle: Any, like: Any) -> Any:
        return to_ndarray(engine_result(core_handle, np.dtype(like.dtype)))

    def copy_into(self, target: Any, source: Any) -> Any:
        source.copyto(target)
        return target
