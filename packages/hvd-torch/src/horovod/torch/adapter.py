"""How torch tensors meet hvd's engine: the TensorAdapter that horovod.common's collectives use.

Tensors cross without a copy: the engine reads (and, for in-place and same-shape results,
writes) the tensor's memory, given as (address, byte count) for CPU tensors (torch's DLPack export
alone costs more than the rest of a submission) and through DLPack otherwise; engine-allocated
results (allgather, alltoall, reducescatter) come back as tensors sharing the engine's buffer.
"""

from __future__ import annotations

from typing import Any

import torch
from horovod.common.framework_api import DEVICE_CPU, DEVICE_CUDA, DTYPE_CODES
from torch.utils.dlpack import from_dlpack  # torch.from_dlpack itself (which torch's stub does not export)

# torch names its dtypes as the engine does (torch.float32 <-> "float32", torch.bool <-> "bool").
_DTYPE_CODES: dict[torch.dtype, int] = {getattr(torch, name): code for name, code in DTYPE_CODES.items()}
SUPPORTED_DTYPES: tuple[torch.dtype, ...] = tuple(_DTYPE_CODES)

_DEVICE_KINDS = {"cpu": DEVICE_CPU, "cuda": DEVICE_CUDA}  # ROCm tensors are "cuda" in torch


def dtype_code(dtype: torch.dtype) -> int:
    """The engine's code for a torch dtype; ValueError naming the dtype when unsupported."""
    code = _DTYPE_CODES.get(dtype)
    if code is None:
        supported = ", ".join(str(d).replace("torch.", "") for d in SUPPORTED_DTYPES)
        raise ValueError(f"dtype {dtype} is not supported by hvd collectives (supported: {supported})")
    return code


def device_kind(device: torch.device) -> int:
    kind = _DEVICE_KINDS.get(device.type)
    if kind is None:
        raise ValueError(f"tensors on {device.type!r} devices are not supported by hvd collectives (CPU and CUDA are)")
    return kind


class TorchAdapter:
    """The :class:`horovod.common.framework_api.TensorAdapter` for torch tensors."""

    def prepare(self, tensor: object) -> torch.Tensor:
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"expected a torch.Tensor, got {type(tensor).__name__}")
        if tensor.layout != torch.strided:
            raise ValueError(
                f"{tensor.layout} tensors are not supported by this collective; use a dense tensor "
                "(sparse gradients go through sparse_allreduce_async)"
            )
        if tensor.requires_grad:  # DLPack refuses tensors that require grad; the memory is the same
            tensor = tensor.detach()
        if not tensor.is_contiguous():
            tensor = tensor.contiguous()
        return tensor

    def describe(self, tensor: torch.Tensor) -> tuple[int, torch.Size, int]:
        # Per tensor of every step: the common case (a supported dtype, a CPU tensor) avoids
        # building a torch.device and calling the helpers that also explain what is unsupported.
        code = _DTYPE_CODES.get(tensor.dtype)
        if code is None:
            code = dtype_code(tensor.dtype)
        return code, tensor.shape, DEVICE_CPU if tensor.is_cpu else device_kind(tensor.device)

    def buffer(self, tensor: torch.Tensor) -> tuple[int, int] | torch.Tensor:
        # A prepared tensor is contiguous, so its memory is exactly nbytes from data_ptr().
        return (tensor.data_ptr(), tensor.nbytes) if tensor.is_cpu else tensor

    def placement(self, tensor: torch.Tensor) -> tuple[int, int]:
        # The current stream of the tensor's device: the engine reads the tensor after what is queued
        # there (its producers), and synchronizing makes it wait for the result; no device-wide sync.
        return tensor.device.index or 0, torch.cuda.current_stream(tensor.device).cuda_stream

    def empty_like(self, tensor: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(tensor, memory_format=torch.contiguous_format)

    def from_engine(self, core_handle: Any, like: torch.Tensor) -> torch.Tensor:
        output = core_handle.output()
        if output is None:
            return torch.empty(core_handle.output_shape, dtype=like.dtype, device=like.device)
        return from_dlpack(output)  # shares the engine's buffer (kept alive by the tensor)

    def copy_into(self, target: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
        if source.data_ptr() == target.data_ptr() and source.stride() == target.stride():
            return target  # the engine already wrote into the target's memory
        with torch.no_grad():  # also for leaves that require grad, as Horovod's in-place ops allow
            target.copy_(source)
        return target
