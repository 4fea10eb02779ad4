"""DistributedOptimizer: an ``mx.optimizer.Optimizer`` that averages gradients over ranks before
each update (for the Module API; Gluon users take :class:`horovod.mxnet.DistributedTrainer`)."""

from __future__ import annotations

from collections.abc import Callable
from types import FunctionType
from typing import Any

import mxnet as mx

from horovod.common.framework_api import ProcessSet, Sum, global_process_set, set_size, split_groups
from horovod.mxnet.mpi_ops import allreduce_, grouped_allreduce_

__all__ = ["DistributedOptimizer"]

# This object's own attributes; every other attribute is the wrapped optimizer's.
_OWN = frozenset({"_optimizer", "_gradient_predivide_factor", "_num_groups", "_process_set"})


class DistributedOptimizer(mx.optimizer.Optimizer):  # type: ignore[misc]  # (mxnet is untyped)
    """Wraps ``optimizer``: ``update`` and ``update_multi_precision`` first allreduce the gradients
    in place (average over ``process_set``, Horovod's predivide split: scaled by
    ``1 / gradient_predivide_factor`` before the sum and ``gradient_predivide_factor / size``
    after), then let ``optimizer`` update. Aggregated updates (SGD's, Adam's: tuples of indices,
    weights and gradients) are reduced as ``num_groups`` grouped allreduces when ``num_groups > 0``,
    else one allreduce per gradient.

    An instance of ``mx.optimizer.Optimizer`` (MXNet checks that) which holds no state of its own:
    reading or setting any other attribute (``lr``, ``rescale_grad``, ``param_dict``...) reaches
    ``optimizer``, so Trainer and Module drive it as they would ``optimizer``.

    :param optimizer: the ``mx.optimizer.Optimizer`` to wrap (``ValueError`` for anything else, or for a
        DistributedOptimizer).
    :param gradient_predivide_factor: gradients are scaled by ``1/f`` before the sum and by ``f/size`` after it (default
        1.0; positive).
    :param num_groups: reduce aggregated updates as this many grouped allreduces (default 0: one allreduce per
        gradient).
    :param process_set: the ranks gradients are averaged over (default ``global_process_set``, every rank).
    """

    _optimizer: Any
    _gradient_predivide_factor: float
    _num_groups: int
    _process_set: ProcessSet

    def __init__(
        self,
        optimizer: Any,
        gradient_predivide_factor: float = 1.0,
        num_groups: int = 0,
        process_set: ProcessSet = global_process_set,
    ) -> None:
        # No super().__init__: it would set the optimizer's attributes (lr, wd...) on this proxy.
        if not isinstance(optimizer, mx.optimizer.Optimizer):
            raise ValueError(f"DistributedOptimizer wraps an mx.optimizer.Optimizer, got {type(optimizer).__name__}")
        if isinstance(optimizer, DistributedOptimizer):
            raise ValueError("the optimizer is a DistributedOptimizer already")
        if gradient_predivide_factor <= 0:
            raise ValueError(f"gradient_predivide_factor must be positive, got {gradient_predivide_factor}")
        if num_groups < 0:
            raise ValueError(f"num_groups must be a non-negative integer, got {num_groups}")
        own = self.__dict__
        own["_optimizer"] = optimizer
        own["_gradient_predivide_factor"] = float(gradient_predivide_factor)
        own["_num_groups"] = int(num_groups)
        own["_process_set"] = process_set

    # --- the wrapped optimizer's attributes ---------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        if name in _OWN or name.startswith("__"):  # (unpickling: no _optimizer yet; no dunder lookups)
            raise AttributeError(name)
        return getattr(self._optimizer, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN:
            self.__dict__[name] = value
        else:
            setattr(self._optimizer, name, value)

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__)  # (Trainer.save_states pickles the optimizer)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def learning_rate(self) -> float:
        return float(self._optimizer.learning_rate)

    # --- the updates --------------------------------------------------------------------------------

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """Averages ``grad`` over the ranks, then lets the wrapped optimizer update ``weight``.

        :param index: the weight's index (or a tuple of them, for an aggregated update), as MXNet passes it; it names
            the allreduce.
        :param weight: the weight (or weights) to update.
        :param grad: the gradient (or gradients); averaged over the ranks in place first.
        :param state: the optimizer's state for the weight, as ``create_state`` made it.
        """
        self._allreduce(index, grad)
        self._optimizer.update(index, weight, grad, state)

    def update_multi_precision(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """As :meth:`update`, through the wrapped optimizer's ``update_multi_precision``.

        :param index: the weight's index (or a tuple of them, for an aggregated update), as MXNet passes it; it names
            the allreduce.
        :param weight: the weight (or weights) to update.
        :param grad: the gradient (or gradients); averaged over the ranks in place first.
        :param state: the optimizer's state for the weight, as ``create_state`` made it.
        """
        self._allreduce(index, grad)
        self._optimizer.update_multi_precision(index, weight, grad, state)

    def _allreduce(self, index: Any, grad: Any) -> None:
        size = set_size(self._process_set)
        if size == 1:
            return
        # A sum (average=False in Horovod's code), the division by the ranks being the postscale.
        pre, post = 1.0 / self._gradient_predivide_factor, self._gradient_predivide_factor / size
        ps = self._process_set
        # Named by the optimizer's index, the same on every rank (Trainer's position, Module's name).
        if not isinstance(index, (tuple, list)):
            allreduce_(grad, op=Sum, name=f"grad.{index}", prescale_factor=pre, postscale_factor=post, process_set=ps)
        elif self._num_groups > 0:
            positions = split_groups(range(len(index)), self._num_groups)
            for priority, group in enumerate(positions):
                name = f"grad.{index[group[0]]}:{index[group[-1]]}"
                tensors = [grad[i] for i in group]
                grouped_allreduce_(
                    tensors,
                    op=Sum,
                    name=name,
                    priority=-priority,
                    prescale_factor=pre,
                    postscale_factor=post,
                    process_set=ps,
                )
        else:
            for priority, (i, g) in enumerate(zip(index, grad, strict=True)):
                name = f"grad.{i}"
                allreduce_(
                    g, op=Sum, name=name, priority=-priority, prescale_factor=pre, postscale_factor=post, process_set=ps
                )


def _forwarded(name: str) -> Callable[..., Any]:
    def forward(self: DistributedOptimizer, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._optimizer, name)(*args, **kwargs)

    forward.__name__ = name
    forward.__doc__ = (
        f"The wrapped optimizer's ``{name}``.\n\n"
        ":param args: its positional arguments.\n:param kwargs: its keyword arguments."
    )
    return forward


# Optimizer's own methods (create_state, set_learning_rate, set_lr_mult, _get_lrs...) would run on
# this proxy instead of on the wrapped optimizer, missing its overrides: forward each of them.
# (Plain functions only: the static ones, register and create_optimizer, need no instance.)
for _name, _value in vars(mx.optimizer.Optimizer).items():
    if isinstance(_value, FunctionType) and not _name.startswith("__") and _name not in vars(DistributedOptimizer):
        setattr(DistributedOptimizer, _name, _forwarded(_name))
