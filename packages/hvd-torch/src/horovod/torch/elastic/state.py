"""``TorchState``: a model, an optimizer, samplers and plain attributes, kept by elastic training."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from horovod.common.elastic import ObjectState
from horovod.torch.elastic.sampler import ElasticSampler
from horovod.torch.functions import broadcast_optimizer_state, broadcast_parameters
from horovod.torch.objects import allgather_object, broadcast_object


class _Handler:
    """One tracked object (a model, an optimizer, a sampler): saved as a deep copy of its
    ``state_dict``, restored with ``load_state_dict``, synchronised from rank 0 by ``sync``."""

    def __init__(self, value: Any, sync: Callable[[Any], None], reset: Callable[[Any], None] | None = None) -> None:
        self.value = value
        self._sync = sync
        self._reset = reset
        self.save()

    def save(self) -> None:
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self) -> None:
        self.value.load_state_dict(self._saved)

    def sync(self) -> None:
        self._sync(self.value)

    def reset(self) -> None:
        """A new world formed."""
        if self._reset is not None:
            self._reset(self.value)


def _sync_sampler(sampler: ElasticSampler) -> None:
    # Every rank's record, united (record_indices records a rank's own only), then rank 0's epoch.
    processed: set[int] = set().union(*allgather_object(sampler.processed_indices, name="__hvd.elastic.sampler"))
    state = sampler.state_dict()
    state["processed_indices"] = processed
    sampler.load_state_dict(broadcast_object(state, root_rank=0, name="__hvd.elastic.sampler.state"))


def _handler_for(value: Any) -> _Handler | None:
    if isinstance(value, torch.nn.Module):
        return _Handler(value, lambda model: broadcast_parameters(model.state_dict(), root_rank=0))
    if isinstance(value, torch.optim.Optimizer):
        return _Handler(value, lambda optimizer: broadcast_optimizer_state(optimizer, root_rank=0))
    if isinstance(value, ElasticSampler):
        # Repartitioned over the new world even when no sync follows (only hosts removed).
        return _Handler(value, _sync_sampler, reset=ElasticSampler.reset)
    return None


class TorchState(ObjectState):
    """Horovod's ``TorchState(model=None, optimizer=None, **kwargs)``.

    Models (``torch.nn.Module``), optimizers and ``ElasticSampler`` objects, given as ``model``,
    ``optimizer`` or any keyword, are saved as deep copies of their ``state_dict`` and synchronised
    with ``broadcast_parameters`` / ``broadcast_optimizer_state``; every other keyword is a plain
    attribute (:class:`~horovod.common.elastic.ObjectState`). All are attributes of the state.

    :param model: a ``torch.nn.Module`` kept in the state (its ``state_dict``), optional.
    :param optimizer: a ``torch.optim.Optimizer`` kept in the state (its ``state_dict``), optional.
    :param kwargs: further objects kept in the state, by attribute name: models, optimizers and ``ElasticSampler``
        objects by their ``state_dict``, anything else as a plain attribute (deep-copied at each commit).
    """

    _handlers: dict[str, _Handler]

    def __init__(self, model: Any = None, optimizer: Any = None, **kwargs: Any) -> None:
        kwargs.update(model=model, optimizer=optimizer)
        handlers: dict[str, _Handler] = {}
        plain: dict[str, Any] = {}
        for name, value in kwargs.items():
            handler = _handler_for(value)
            if handler is not None:
                handlers[name] = handler
            elif value is not None or name not in ("model", "optimizer"):
                plain[name] = value
        object.__setattr__(self, "_handlers", handlers)
        for name, handler in handlers.items():
            object.__setattr__(self, name, handler.value)
        # hvd-core's defaults: its broadcast_object under one fixed name (the response cache then
        # serves every commit's check after the first) and its rank.
        super().__init__(**plain)

    def save(self) -> None:
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self) -> None:
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self) -> None:
        for handler in self._handlers.values():
            handler.sync()
        super().sync()

    def reset(self) -> None:
        for handler in self._handlers.values():
            handler.reset()
        super().reset()

    def __setattr__(self, name: str, value: Any) -> None:
        handlers = self.__dict__.get("_handlers", {})
        if name in handlers:
            handlers[name].value = value  # a new model or optimizer object replaces the tracked one
        super().__setattr__(name, value)
