"""SyncBatchNorm: batch normalisation with statistics over the whole (multi-rank) batch.

In training, each rank computes its batch's per-channel count, mean and sum of squared deviations;
one allgather gives every rank all of them, combined exactly (Chan et al.'s parallel formula) into
the statistics of the concatenated batch. The result equals ``torch.nn.BatchNorm`` applied to the
concatenation of every rank's batch, including the running statistics. Backward allreduces the
two per-channel sums the input gradient needs; weight and bias gradients stay local (the
DistributedOptimizer averages them, like every other gradient).
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from horovod.common import framework_api as api
from horovod.common.framework_api import ProcessSet, global_process_set
from horovod.torch.mpi_ops import Sum, allgather_async, allreduce_async, synchronize
from torch.nn.modules.batchnorm import _BatchNorm

# Stable collective names per layer, so that repeated steps hit the engine's response cache. A
# layer is named when it first runs under a Horovod instance, in the same order on every rank.
# Horovod instance (api.current_instance()) -> layer -> name.
_layer_names: weakref.WeakKeyDictionary[object, weakref.WeakKeyDictionary[torch.nn.Module, str]] = (
    weakref.WeakKeyDictionary()
)
_layer_names_lock = threading.Lock()


def _layer_name(module: torch.nn.Module) -> str:
    instance = api.current_instance()
    with _layer_names_lock:
        names = _layer_names.get(instance)
        if names is None:
            names = _layer_names[instance] = weakref.WeakKeyDictionary()
        name = names.get(module)
        if name is None:
            name = names[module] = api.auto_name("sync_batch_norm")
    return name


class SyncBatchNorm(_BatchNorm):
    """Applies synchronous batch normalisation over the batches of every rank ``(N, C, *)``.

    Arguments as ``torch.nn.BatchNorm1d/2d/3d`` (any input of at least two dimensions, channels
    second), plus ``process_set``: the ranks whose batches are normalised together. In evaluation
    mode with running statistics the layer is local, as BatchNorm; without running statistics the
    batch statistics are synchronised in evaluation mode too (as in Horovod).

    :param num_features: the number of channels ``C`` of the input ``(N, C, *)``.
    :param eps: added to the variance for numerical stability (default 1e-5).
    :param momentum: the weight of the newest batch in the running statistics (default 0.1); ``None`` for a cumulative
        average.
    :param affine: learn a per-channel scale and shift (default ``True``).
    :param track_running_stats: keep running mean and variance for evaluation (default ``True``); without them batch
        statistics are used in evaluation too.
    :param device: the device of the layer's parameters and buffers, as for ``torch.nn.BatchNorm2d``.
    :param dtype: the dtype of the layer's parameters and buffers, as for ``torch.nn.BatchNorm2d``.
    :param process_set: the ranks whose batches are normalised together (keyword only; default ``global_process_set``,
        every rank); every member must run the layer in the same steps.
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        process_set: ProcessSet = global_process_set,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device=device, dtype=dtype)
        self.process_set = process_set

    def _check_input_dim(self, input: torch.Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """Normalises ``input`` with the mean and variance of every rank's batch (or with the running
        statistics in evaluation mode); returns the normalised tensor.

        :param input: a batch ``(N, C, *)`` of at least two dimensions (``ValueError`` otherwise).
        """
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        # Running statistics are updated only while training with track_running_stats.
        updated = self.training and self.track_running_stats
        running_mean = self.running_mean if not self.training or self.track_running_stats else None
        running_var = self.running_var if not self.training or self.track_running_stats else None
        if not use_batch_stats or api.set_size(self.process_set) == 1:
            return F.batch_norm(
                input, running_mean, running_var, self.weight, self.bias, use_batch_stats, factor, self.eps
            )
        return _SyncBatchNorm.apply(
            input,
            self.weight,
            self.bias,
            running_mean if updated else None,
            running_var if updated else None,
            self.eps,
            factor,
            self.process_set,
            _layer_name(self),
        )


def _channel_shape(x: torch.Tensor) -> list[int]:
    return [1, x.shape[1]] + [1] * (x.dim() - 2)


def _reduced_dims(x: torch.Tensor) -> list[int]:
    return [0, *range(2, x.dim())]


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


class _SyncBatchNorm(torch.autograd.Function):
    # The signature of `apply`, for type checkers only (torch's is untyped: it passes its arguments
    # to forward); `ctx` is torch's per-call context, with attributes of forward's choosing (Any).
    if TYPE_CHECKING:

        @classmethod
        def apply(
            cls,
            input: torch.Tensor,
            weight: torch.Tensor | None,
            bias: torch.Tensor | None,
            running_mean: torch.Tensor | None,
            running_var: torch.Tensor | None,
            eps: float,
            momentum: float,
            process_set: ProcessSet,
            name: str,
        ) -> torch.Tensor: ...

    @staticmethod
    def forward(
        ctx: Any,
        input: torch.Tensor,
        weight: torch.Tensor | None,
        bias: torch.Tensor | None,
        running_mean: torch.Tensor | None,
        running_var: torch.Tensor | None,
        eps: float,
        momentum: float,
        process_set: ProcessSet,
        name: str,
    ) -> torch.Tensor:
        channels = input.shape[1]
        x = input.to(_compute_dtype(input.dtype))
        dims, shape = _reduced_dims(x), _channel_shape(x)
        count = x.numel() // channels if channels else 0
        if count > 0:
            var, mean = torch.var_mean(x, dim=dims, correction=0)
        else:
            var = mean = torch.zeros(channels, dtype=x.dtype, device=x.device)
        # One allgather of (count, mean, sum of squared deviations) per rank, in float64.
        local = torch.cat(
            [torch.tensor([float(count)], dtype=torch.float64, device=x.device), mean.double(), (var * count).double()]
        )
        stats: torch.Tensor = synchronize(allgather_async(local.unsqueeze(0), f"{name}.stats", process_set))
        counts, means, m2s = stats[:, :1], stats[:, 1 : 1 + channels], stats[:, 1 + channels :]
        total = float(counts.sum())
        if total <= 1:
            raise ValueError(
                f"Expected more than 1 value per channel when training, got {int(total)} over all ranks "
                f"(input size {list(input.shape)} here)"
            )
        global_mean = (counts * means).sum(0) / total
        global_m2 = (m2s + counts * (means - global_mean) ** 2).sum(0)
        invstd = torch.rsqrt(global_m2 / total + eps)
        if running_mean is not None:
            assert running_var is not None  # BatchNorm has both running statistics or neither
            with torch.no_grad():
                running_mean.mul_(1 - momentum).add_(global_mean.to(running_mean.dtype), alpha=momentum)
                running_var.mul_(1 - momentum).add_((global_m2 / (total - 1)).to(running_var.dtype), alpha=momentum)
        mean, invstd = global_mean.to(x.dtype), invstd.to(x.dtype)
        out = (x - mean.view(shape)) * invstd.view(shape)
        if weight is not None:
            assert bias is not None  # an affine BatchNorm has both weight and bias
            out = out * weight.to(x.dtype).view(shape) + bias.to(x.dtype).view(shape)
        ctx.save_for_backward(input, weight, mean, invstd)
        ctx.total, ctx.process_set, ctx.name = total, process_set, name
        return out.to(input.dtype)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        input, weight, mean, invstd = ctx.saved_tensors
        need_input, need_weight, need_bias = ctx.needs_input_grad[:3]
        x = input.to(mean.dtype)
        dy = grad_output.to(mean.dtype)
        dims, shape = _reduced_dims(x), _channel_shape(x)
        xmu = x - mean.view(shape)
        sum_dy = dy.sum(dims)
        sum_dy_xmu = (dy * xmu).sum(dims)
        grad_input = grad_weight = grad_bias = None
        if need_input:
            # The input gradient needs both sums over the whole batch: one allreduce.
            sums = torch.cat([sum_dy, sum_dy_xmu]).double()
            sums = synchronize(allreduce_async(sums, name=f"{ctx.name}.grad", op=Sum, process_set=ctx.process_set))
            channels = x.shape[1]
            mean_dy = (sums[:channels] / ctx.total).to(x.dtype)
            mean_dy_xmu = (sums[channels:] / ctx.total).to(x.dtype)
            scale = invstd if weight is None else invstd * weight.to(x.dtype)
            grad_input = (dy - mean_dy.view(shape) - xmu * (invstd * invstd * mean_dy_xmu).view(shape)) * scale.view(
                shape
            )
            grad_input = grad_input.to(input.dtype)
        # Weight and bias gradients are local, like any parameter's: DistributedOptimizer averages them.
        if weight is not None and need_weight:
            grad_weight = (sum_dy_xmu * invstd).to(weight.dtype)
        if weight is not None and need_bias:
            grad_bias = sum_dy.to(weight.dtype)
        return grad_input, grad_weight, grad_bias, None, None, None, None, None, None
