"""DistributedTrainer: a Gluon Trainer whose step averages the gradients over ranks."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import mxnet as mx

from horovod.common.framework_api import ProcessSet, Sum, global_process_set, set_size, shared_parameters, split_groups
from horovod.mxnet.compression import Compression, CompressorLike
from horovod.mxnet.mpi_ops import allreduce_, grouped_allreduce_
from horovod.mxnet.optimizer import DistributedOptimizer

__all__ = ["DistributedTrainer"]


@shared_parameters
class DistributedTrainer(mx.gluon.Trainer):  # type: ignore[misc]  # (mxnet is untyped)
    """``mx.gluon.Trainer(params, optimizer, optimizer_params, kvstore=None)`` whose
    ``step(batch_size)`` (and ``allreduce_grads()``) first sums every gradient over ``process_set``
    in place, ``compression`` applied around the sum; the Trainer's own gradient scale divides by
    the number of ranks, so with every rank passing its own batch size the update is that of the
    ranks' averaged gradients. ``gradient_predivide_factor`` splits that division: gradients are
    scaled by ``1 / gradient_predivide_factor`` before the sum, ``gradient_predivide_factor / size``
    after. ``num_groups > 0``: the gradients go as that many grouped allreduces, else one allreduce
    each (the engine fuses them). ``prefix`` names this trainer's tensors; give each its own when a
    program has several.

    ``params``: a ``ParameterDict`` (``net.collect_params()``) is taken in its order, a dict in
    sorted key order, a list as it is; the order must be the same on every rank. One device per rank.

    :param params: the parameters to train: a ``ParameterDict`` (``net.collect_params()``, in its order), a dict (sorted
        key order) or a list; the same order on every rank.
    :param optimizer: the optimizer, by name (``sgd``) or an ``mx.optimizer.Optimizer`` (a DistributedOptimizer is
        unwrapped, with a warning).
    :param optimizer_params: the optimizer's arguments, when it is given by name.
    :param compression: |shared:gradient_compression|
    :param gradient_predivide_factor: gradients are scaled by ``1/f`` before the sum and by ``f/size`` after it (default
        1.0; positive).
    :param prefix: a prefix of this trainer's tensor names; give each trainer its own when a program has several.
    :param num_groups: send the gradients as this many grouped allreduces (default 0: one each).
    :param process_set: the ranks gradients are averaged over (default ``global_process_set``, every rank).
    """

    def __init__(
        self,
        params: Any,
        optimizer: Any,
        optimizer_params: dict[str, Any] | None = None,
        compression: CompressorLike = Compression.none,
        gradient_predivide_factor: float = 1.0,
        prefix: str | None = None,
        num_groups: int = 0,
        process_set: ProcessSet = global_process_set,
    ) -> None:
        if isinstance(optimizer, DistributedOptimizer):
            # Its allreduce would come on top of this trainer's: take the optimizer it wraps.
            warnings.warn(
                "DistributedTrainer does not take a DistributedOptimizer: using the optimizer it wraps",
                UserWarning,
                stacklevel=2,
            )
            optimizer = optimizer._optimizer
        if prefix is not None and not isinstance(prefix, str):
            raise ValueError(f"DistributedTrainer: prefix must be a string or None, got {type(prefix).__name__}")
        if gradient_predivide_factor <= 0:
            raise ValueError(f"gradient_predivide_factor must be positive, got {gradient_predivide_factor}")
        if num_groups < 0:
            raise ValueError(f"num_groups must be a non-negative integer, got {num_groups}")
        # Trainer would sort a ParameterDict by key, and its keys hold per-process name counters
        # (dense9_ on one rank, dense10_ on another sort differently); its own order is the model's.
        if isinstance(params, mx.gluon.ParameterDict):
            params = list(params.values())
        elif isinstance(params, dict):
            params = [params[key] for key in sorted(params, key=str)]
        super().__init__(params, optimizer, optimizer_params=optimizer_params, kvstore=None)
        self._compression = compression
        self._gradient_predivide_factor = float(gradient_predivide_factor)
        self._prefix = prefix or ""
        self._num_groups = int(num_groups)
        self._process_set = process_set
        # step(batch_size) rescales the gradients by _scale / batch_size: dividing _scale by the
        # ranks does the averaging in the optimizer's own multiply (cheaper than a postscale pass).
        self._scale *= self._gradient_predivide_factor / set_size(process_set)

    def _allreduce_grads(self) -> None:
        if set_size(self._process_set) == 1 and self._gradient_predivide_factor == 1.0:
            return  # (with a predivide factor the prescale still has to happen, even alone)
        # (name, gradient, what is sent, compression context), in the trainer's order.
        entries = []
        for i, param in enumerate(self._params):
            if param.grad_req != "null":
                grad = param.list_grad()[0]
                sent, ctx = self._compression.compress(grad)
                entries.append((f"{self._prefix}grad.{i}", grad, sent, ctx))
        # Sums: the division by the ranks is in _scale.
        pre, ps = 1.0 / self._gradient_predivide_factor, self._process_set
        if self._num_groups > 0:
            for priority, group in enumerate(split_groups(entries, self._num_groups)):
                # A group of one dtype each: mixed dtypes cannot share a fusion buffer anyway.
                for same_dtype in _by_dtype(group):
                    name = f"{same_dtype[0][0]}:{same_dtype[-1][0]}"
                    tensors = [e[2] for e in same_dtype]
                    grouped_allreduce_(
                        tensors, op=Sum, name=name, priority=-priority, prescale_factor=pre, process_set=ps
                    )
        else:
            for priority, (name, _, sent, _) in enumerate(entries):
                allreduce_(sent, op=Sum, name=name, priority=-priority, prescale_factor=pre, process_set=ps)
        for _, grad, sent, ctx in entries:
            if sent is not grad:  # compressed into a new array: back into the gradient, in place
                grad[:] = self._compression.decompress(sent, ctx)


def _by_dtype(entries: Sequence[tuple[str, Any, Any, Any]]) -> list[list[tuple[str, Any, Any, Any]]]:
    groups: dict[Any, list[tuple[str, Any, Any, Any]]] = {}
    for entry in entries:
        groups.setdefault(entry[2].dtype, []).append(entry)
    return list(groups.values())
