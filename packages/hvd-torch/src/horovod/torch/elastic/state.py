"""``TorchState``: a model, an optimizer, samplers and plain attributes, kept by elastic training."""

from __future__ import annotations

import copy
from typing import Any

import torch
from horovod.common.elastic import ObjectState
from horovod.torch.elastic.sampler import ElasticSampler
from horovod.torch.functions import broadcast_optimizer_state, broadcast_parameters
from horovod.torch.objects import allgather_object, broadcast_object


class StateHandler:
    """Horovod's base of the objects ``TorchState`` tracks: ``save`` keeps the value's state,
    ``restore`` brings it back, ``sync`` makes every rank's equal to rank 0's. A custom kind of object
    is tracked by registering a subclass for its type (:func:`set_handler_registry`).

    :param value: the object tracked.
    """

    def __init__(self, value: Any) -> None:
        self.value = value

    def save(self) -> None:
        raise NotImplementedError()

    def restore(self) -> None:
        raise NotImplementedError()

    def sync(self) -> None:
        raise NotImplementedError()

    def reset(self) -> None:
        """A new world formed (hvd's addition: nothing by default)."""

    def set_value(self, value: Any) -> None:
        """A new object replaces the tracked one; its state is saved at once.

        :param value: the object tracked from now on.
        """
        self.value = value
        self.save()


class _StateDictHandler(StateHandler):
    """An object with ``state_dict``/``load_state_dict``: saved as a deep copy of its state dict."""

    def __init__(self, value: Any) -> None:
        super().__init__(value)
        self.save()

    def save(self) -> None:
        self._saved_state = copy.deepcopy(self.value.state_dict())

    def restore(self) -> None:
        self.value.load_state_dict(self._saved_state)


class ModelStateHandler(_StateDictHandler):
    """A ``torch.nn.Module``, synchronised with ``broadcast_parameters`` from rank 0.

    :param value: the model.
    """

    def sync(self) -> None:
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class OptimizerStateHandler(_StateDictHandler):
    """A ``torch.optim.Optimizer``, synchronised with ``broadcast_optimizer_state`` from rank 0.

    :param value: the optimizer.
    """

    def sync(self) -> None:
        broadcast_optimizer_state(self.value, root_rank=0)


class SamplerStateHandler(_StateDictHandler):
    """An ``ElasticSampler``: every rank's processed indices united, then rank 0's epoch; it is
    repartitioned over a new world even when no sync follows (only hosts removed).

    :param value: the sampler.
    """

    def sync(self) -> None:
        sampler = self.value
        # record_indices records a rank's own only: every rank's, united.
        processed: set[int] = set().union(*allgather_object(sampler.processed_indices, name="__hvd.elastic.sampler"))
        state = sampler.state_dict()
        state["processed_indices"] = processed
        sampler.load_state_dict(broadcast_object(state, root_rank=0, name="__hvd.elastic.sampler.state"))

    def reset(self) -> None:
        self.value.reset()


_handler_registry: list[tuple[type, type[StateHandler]]] = [
    (torch.nn.Module, ModelStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (ElasticSampler, SamplerStateHandler),
]


def get_handler_registry() -> list[tuple[type, type[StateHandler]]]:
    """The (type, handler class) pairs ``TorchState`` consults, first match first (Horovod's)."""
    return _handler_registry


def set_handler_registry(registry: list[tuple[type, type[StateHandler]]]) -> None:
    """Replaces the registry, e.g. with a custom pair put first (Horovod's).

    :param registry: (type, handler class) pairs, consulted in order.
    """
    global _handler_registry
    _handler_registry = registry


def _handler_for(value: Any) -> StateHandler | None:
    for kind, handler in _handler_registry:
        if isinstance(value, kind):
            return handler(value)
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

    _handlers: dict[str, StateHandler]

    def __init__(self, model: Any = None, optimizer: Any = None, **kwargs: Any) -> None:
        kwargs.update(model=model, optimizer=optimizer)
        handlers: dict[str, StateHandler] = {}
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
            handlers[name].set_value(value)  # a new model or optimizer object replaces the tracked one
        super().__setattr__(name, value)
