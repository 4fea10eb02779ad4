"""``TorchState``: a model, an optimizer, samplers and plain attributes, kept by elastic training."""

from __future__ import annotations

import copy
from typing import Any

import torch
from horovod.common.elastic import ObjectState
from horovod.torch.elastic.sampler import ElasticSampler
from horovod.torch.functions import broadcast_optimizer_state, broadcast_parameters
from horovod.torch.objects import allgather_object, broadcast_object


class _Handler:
    """How one kind of attribute is saved, restored and synchronised."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.save()

    def save(self) -> None:
        raise NotImplementedError

    def restore(self) -> None:
        raise NotImplementedError

    def sync(self) -> None:
        raise NotImplementedError

    def reset(self) -> None:
        """A new world formed."""


class _ModelHandler(_Handler):
    def save(self) -> None:
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self) -> None:
        self.value.load_state_dict(self._saved)

    def sync(self) -> None:
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class _OptimizerHandler(_Handler):
    def save(self) -> None:
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self) -> None:
        self.value.load_state_dict(self._saved)

    def sync(self) -> None:
        broadcast_optimizer_state(self.value, root_rank=0)


class _SamplerHandler(_Handler):
    def save(self) -> None:
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self) -> None:
        self.value.load_state_dict(self._saved)

    def sync(self) -> None:
        # Every rank's record, united (record_indices records a rank's own only), then rank 0's epoch.
        processed: set[int] = set().union(*allgather_object(self.value.processed_indices, name="__hvd.elastic.sampler"))
        state = self.value.state_dict()
        state["processed_indices"] = processed
        self.value.load_state_dict(broadcast_object(state, root_rank=0, name="__hvd.elastic.sampler.state"))

    def reset(self) -> None:
        self.value.reset()  # repartitioned over the new world even when no sync follows


def _handler_for(value: Any) -> _Handler | None:
    if isinstance(value, torch.nn.Module):
        return _ModelHandler(value)
    if isinstance(value, torch.optim.Optimizer):
        return _OptimizerHandler(value)
    if isinstance(value, ElasticSampler):
        return _SamplerHandler(value)
    return None


class TorchState(ObjectState):
    """Horovod's ``TorchState(model=None, optimizer=None, **kwargs)``.

    Models (``torch.nn.Module``), optimizers and ``ElasticSampler`` objects, given as ``model``,
    ``optimizer`` or any keyword, are saved as deep copies of their ``state_dict`` and synchronised
    with ``broadcast_parameters`` / ``broadcast_optimizer_state``; every other keyword is a plain
    attribute (:class:`~horovod.common.elastic.ObjectState`). All are attributes of the state.
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
