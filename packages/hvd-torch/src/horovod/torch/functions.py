"""Synchronising model and optimizer state, and arbitrary Python objects, between ranks."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

import cloudpickle
import torch

from horovod.common import basics
from horovod.common.process_sets import ProcessSet, global_process_set
from horovod.torch.mpi_ops import _set_rank, allgather_async, broadcast_, broadcast_async_, synchronize


def broadcast_parameters(params: Any, root_rank: int, process_set: ProcessSet = global_process_set) -> None:
    """Overwrites every rank's parameters with ``root_rank``'s, in place.

    ``params``: ``model.state_dict()`` (a dict, broadcast in sorted key order),
    ``model.named_parameters()`` or ``model.parameters()`` (in their order, which must be the
    same on every rank).
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


def _serialize(obj: Any) -> torch.Tensor:
    return torch.frombuffer(bytearray(cloudpickle.dumps(obj)), dtype=torch.uint8)


def _deserialize(data: torch.Tensor) -> Any:
    return cloudpickle.loads(data.numpy().tobytes())


def broadcast_object(
    obj: Any, root_rank: int = 0, name: str | None = None, process_set: ProcessSet = global_process_set
) -> Any:
    """Returns ``root_rank``'s ``obj`` on every rank (serialised with cloudpickle).

    The root gets its own object back; the others a copy. ``obj`` is ignored on the other ranks.
    """
    base = name or basics.context().auto_name("broadcast_object")
    is_root = _set_rank(process_set) == root_rank
    data = _serialize(obj) if is_root else None
    size = torch.tensor([data.numel() if data is not None else 0], dtype=torch.int64)
    broadcast_(size, root_rank, f"{base}.size", process_set)
    if data is None:
        data = torch.empty(int(size[0]), dtype=torch.uint8)
    broadcast_(data, root_rank, f"{base}.data", process_set)
    return obj if is_root else _deserialize(data)


def allgather_object(obj: Any, name: str | None = None, process_set: ProcessSet = global_process_set) -> list:
    """Returns the list of every rank's ``obj`` (in rank order), serialised with cloudpickle."""
    base = name or basics.context().auto_name("allgather_object")
    data = _serialize(obj)
    sizes_handle = allgather_async(torch.tensor([data.numel()], dtype=torch.int64), f"{base}.sizes", process_set)
    data_handle = allgather_async(data, f"{base}.data", process_set)
    sizes = synchronize(sizes_handle).tolist()
    gathered = synchronize(data_handle)
    objects, start = [], 0
    for size in sizes:
        objects.append(_deserialize(gathered[start : start + size]))
        start += size
    return objects


# --- optimizer state --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _TensorState:
    """A tensor of the root's optimizer state, described (its values travel by broadcast)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    on_cpu: bool


def _params(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [p for group in optimizer.param_groups for p in group["params"]]


def _initialize_state(optimizer: torch.optim.Optimizer) -> None:
    """Creates the optimizer's lazily created state, as Horovod does: one local step with zero
    gradients. Unlike Horovod, parameters and gradients are restored afterwards, so that the step
    has no other effect (with weight decay it would otherwise move the parameters)."""
    from horovod.torch.optimizer import _DistributedOptimizer

    saved = []
    for p in _params(optimizer):
        if p.requires_grad:
            saved.append((p, p.detach().clone(), p.grad))
            zeros = torch.zeros_like(p)
            p.grad = zeros.to_sparse() if isinstance(optimizer, torch.optim.SparseAdam) else zeros
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
    optimizer: torch.optim.Optimizer, root_rank: int, process_set: ProcessSet = global_process_set
) -> None:
    """Makes every rank's optimizer state and hyperparameters (``param_groups`` options such as the
    learning rate) equal to ``root_rank``'s.

    Works for every ``torch.optim`` optimizer but LBFGS (as in Horovod), wrapped in
    DistributedOptimizer or not. State that optimizers create lazily on their first step is created
    first (by a step with zero gradients, as Horovod does), so the state exists after this call.
    """
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    if len(optimizer.state) == 0:
        _initialize_state(optimizer)
    params = _params(optimizer)
    is_root = _set_rank(process_set) == root_rank
    layout = None
    if is_root:
        layout = {
            "groups": [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups],
            "state": {
                index: {
                    key: _TensorState(tuple(v.shape), v.dtype, v.device.type == "cpu") if torch.is_tensor(v) else v
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
    layout = infos[root_rank][1]

    for group, options in zip(optimizer.param_groups, layout["groups"]):
        group.update(options)
    tensors = []
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
                if not (torch.is_tensor(local) and tuple(local.shape) == value.shape and local.dtype == value.dtype):
                    device = torch.device("cpu") if value.on_cpu else p.device
                    state[key] = local = torch.zeros(value.shape, dtype=value.dtype, device=device)
                tensors.append((f"broadcast_optimizer_state.{index}.{key}", local))
            else:
                state[key] = value
    handles = [broadcast_async_(t, root_rank, name, process_set) for name, t in tensors]
    for handle in handles:
        synchronize(handle)
