"""Synchronising model and optimizer state between ranks (objects: :mod:`horovod.torch.objects`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import torch
from horovod.common import framework_api as api
from horovod.common.framework_api import ProcessSet, global_process_set
from horovod.torch.mpi_ops import broadcast_async_, synchronize
from horovod.torch.objects import allgather_object, broadcast_object
from horovod.torch.optimizer import _DistributedOptimizer

__all__ = ["allgather_object", "broadcast_object", "broadcast_optimizer_state", "broadcast_parameters"]


def broadcast_parameters(params: Any, root_rank: int, *, process_set: ProcessSet = global_process_set) -> None:
    """Overwrites every rank's parameters with ``root_rank``'s, in place.

    :param params: the tensors to broadcast: ``model.state_dict()`` (a dict, broadcast in sorted key
        order), ``model.named_parameters()`` or ``model.parameters()`` (in their order, which must be
        the same on every rank). ``ValueError`` for anything else, or for a value that is not a tensor.
    :param root_rank: the rank whose parameters every rank gets (a global rank, also with a
        ``process_set``).
    :param process_set: the ranks taking part (default ``global_process_set``, every rank).
    """
    if isinstance(params, dict):
        items = sorted(params.items())
    elif isinstance(params, Iterable):
        items = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError(f"invalid params of type: {type(params).__name__}")
    for name, p in items:
        if not isinstance(p, torch.Tensor):
            raise ValueError(f"broadcast_parameters: {name or 'a parameter'} is a {type(p).__name__}, not a tensor")
    handles = [broadcast_async_(p, root_rank, name, process_set) for name, p in items]
    for handle in handles:
        synchronize(handle)


# --- optimizer state --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _TensorState:
    """A tensor of the root's optimizer state, described (its values travel by broadcast)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    on_cpu: bool
    sparse: bool = False  # a sparse gradient's state (SGD's momentum of a sparse embedding): sent dense


def _params(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [p for group in optimizer.param_groups for p in group["params"]]


def _sparse_parameters(model: Any) -> set[int]:
    """The ids of ``model``'s parameters whose gradients are sparse (``nn.Embedding(sparse=True)``)."""
    if model is None:
        return set()
    return {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding) and m.sparse}


def _initialize_state(optimizer: torch.optim.Optimizer, sparse: set[int]) -> None:
    """Creates the optimizer's lazily created state, as Horovod does: one local step with zero
    gradients, sparse ones for the parameters in ``sparse`` (and all of SparseAdam's). Unlike
    Horovod, parameters and gradients are restored afterwards, so that the step has no other effect
    (with weight decay it would otherwise move the parameters)."""
    saved = []
    for p in _params(optimizer):
        if p.requires_grad:
            saved.append((p, p.detach().clone(), p.grad))
            zeros = torch.zeros_like(p)
            p.grad = zeros.to_sparse() if isinstance(optimizer, torch.optim.SparseAdam) or id(p) in sparse else zeros
    try:
        if isinstance(optimizer, _DistributedOptimizer):
            optimizer._step_locally()  # no allreduce: only this rank takes this step
        else:
            optimizer.step()
    finally:
        with torch.no_grad():
            for p, data, grad in saved:
                p.copy_(data)
                p.grad = grad


def broadcast_optimizer_state(
    optimizer: torch.optim.Optimizer,
    root_rank: int,
    model: Any = None,
    *,
    process_set: ProcessSet = global_process_set,
) -> None:
    """Makes every rank's optimizer state and hyperparameters (``param_groups`` options such as the
    learning rate) equal to ``root_rank``'s (a global rank, also with a ``process_set``).

    Works for every ``torch.optim`` optimizer but LBFGS (as in Horovod), wrapped in
    DistributedOptimizer or not. State that optimizers create lazily on their first step is created
    first (by a step with zero gradients, as Horovod does), so the state exists after this call.

    :param optimizer: the optimizer whose state is broadcast (``ValueError`` for ``torch.optim.LBFGS``).
    :param root_rank: the rank whose state every rank gets.
    :param model: as in Horovod, the module whose sparse embeddings (``nn.Embedding(sparse=True)``)
        get sparse zero gradients in that first step, as their real gradients are; optional.
    :param process_set: the ranks taking part (default ``global_process_set``, every rank).
    """
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    if len(optimizer.state) == 0:
        _initialize_state(optimizer, _sparse_parameters(model))
    params = _params(optimizer)
    is_root = api.rank() == root_rank  # a global rank, as Horovod's root_rank is
    layout = None
    if is_root:
        layout = {
            "groups": [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups],
            "state": {
                index: {
                    key: _TensorState(tuple(v.shape), v.dtype, v.device.type == "cpu", v.is_sparse)
                    if torch.is_tensor(v)
                    else v
                    for key, v in optimizer.state[p].items()
                }
                for index, p in enumerate(params)
                if p in optimizer.state
            },
        }
    # Every rank learns every rank's parameter layout, so that a mismatch fails on all of them.
    shape = [len(group["params"]) for group in optimizer.param_groups]
    infos = allgather_object((shape, layout), name="broadcast_optimizer_state.layout", process_set=process_set)
    if any(other != shape for other, _ in infos):
        raise ValueError(
            "broadcast_optimizer_state: the optimizers differ between ranks (parameters per group: "
            + ", ".join(f"rank {r}: {s}" for r, (s, _) in enumerate(infos))
            + ")"
        )
    layout = infos[api.position_in_set(process_set, root_rank)][1]

    for group, options in zip(optimizer.param_groups, layout["groups"], strict=True):
        group.update(options)
    tensors = []
    sparse_after: list[tuple[dict[str, Any], str, torch.Tensor]] = []
    for index, p in enumerate(params):
        root_state = layout["state"].get(index)
        if root_state is None:
            optimizer.state.pop(p, None)
            continue
        state = optimizer.state[p]
        for key in [k for k in state if k not in root_state]:
            del state[key]
        for key, value in root_state.items():
            if isinstance(value, _TensorState):
                local = state.get(key)
                if torch.is_tensor(local) and local.is_sparse:
                    local = local.to_dense()  # the collectives move dense tensors: sparse again below
                if not (torch.is_tensor(local) and tuple(local.shape) == value.shape and local.dtype == value.dtype):
                    device = torch.device("cpu") if value.on_cpu else p.device
                    local = torch.zeros(value.shape, dtype=value.dtype, device=device)
                if not value.sparse:
                    state[key] = local
                elif not is_root:  # the root keeps its own sparse tensor
                    sparse_after.append((state, key, local))
                tensors.append((f"broadcast_optimizer_state.{index}.{key}", local))
            else:
                state[key] = value
    handles = [broadcast_async_(t, root_rank, name, process_set) for name, t in tensors]
    for handle in handles:
        synchronize(handle)
    for state, key, dense in sparse_after:
        state[key] = dense.to_sparse()
