"""DistributedOptimizer: averages gradients over ranks while backward() is still running.

``hvd.DistributedOptimizer(opt)`` returns an instance of a subclass of ``opt``'s class created on the
fly, so it is still a ``torch.optim.SGD`` (or whatever it wraps). A hook on every parameter starts an
asynchronous allreduce as soon as that parameter's gradient is accumulated, so communication
overlaps the rest of the backward pass; ``step()`` waits for them and then applies the update.
"""

from __future__ import annotations

import contextlib
import warnings
import weakref
from collections import Counter
from collections.abc import Iterator
from typing import Any

import torch
from horovod.common import framework_api as api
from horovod.common.framework_api import ProcessSet, global_process_set, process_set_id, shared_parameters, split_groups
from horovod.torch.compression import Compression, CompressorLike
from horovod.torch.kept_compression import KeptCompression
from horovod.torch.mpi_ops import (
    Adasum,
    Average,
    allreduce_async_,
    grouped_allreduce_async_,
    size,
    sparse_allreduce_async,
    synchronize,
)
from horovod.torch.objects import broadcast_object

# Parameters whose gradients are allreduced together (grouped_allreduce).
_Group = tuple[torch.Tensor, ...]


def _duplicates(names: list[str]) -> list[str]:
    return sorted(name for name, count in Counter(names).items() if count > 1)


class _DistributedOptimizer(torch.optim.Optimizer):
    """The behaviour added to the wrapped optimizer's class (see :func:`DistributedOptimizer`)."""

    def __init__(
        self,
        params: Any,
        named_parameters: Any,
        compression: CompressorLike,
        backward_passes_per_step: int,
        op: int,
        gradient_predivide_factor: float,
        groups: Any,
        sparse_as_dense: bool,
        process_set: ProcessSet,
    ) -> None:
        # The wrapped class's __init__, with the wrapped optimizer's param groups (and their options).
        # (At run time this class is always mixed in before the wrapped one, whose __init__ super()
        # reaches: it has defaults for its options; torch.optim.Optimizer's own needs `defaults`.)
        super().__init__(params)  # type: ignore[call-arg]  # see above: mypy sees Optimizer.__init__
        self._compression = KeptCompression(compression)

        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            named_parameters = [
                (f"allreduce.noname.{i}.{j}", p)
                for i, group in enumerate(self.param_groups)
                for j, p in enumerate(group["params"])
            ]
        if any(not isinstance(item, tuple) for item in named_parameters):
            raise ValueError(
                "named_parameters should be a sequence of tuples (name, parameter), usually produced by "
                "model.named_parameters()."
            )
        duplicates = _duplicates([name for name, _ in named_parameters])
        if duplicates:
            raise ValueError(
                f"Parameter names in named_parameters must be unique. Found duplicates: {', '.join(duplicates)}"
            )
        named_ids = {id(p) for _, p in named_parameters}
        unnamed = [p for group in self.param_groups for p in group["params"] if id(p) not in named_ids]
        if unnamed:
            raise ValueError(
                "named_parameters was specified, but one or more model parameters were not named "
                f"({len(unnamed)} of them, shapes {[tuple(p.shape) for p in unnamed][:5]}). Pass "
                "model.named_parameters() covering every parameter given to the optimizer."
            )
        if backward_passes_per_step < 1:
            raise ValueError(f"backward_passes_per_step must be at least 1, got {backward_passes_per_step}")

        self._parameter_names = {p: name for name, p in sorted(named_parameters, key=lambda item: item[0])}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = dict.fromkeys(self._parameter_names, backward_passes_per_step)
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set

        # Parameter (or tuple of parameters for a group) -> (handle or None, compression context).
        self._handles: dict[Any, tuple[Any, Any]] = {}
        self._hook_handles: list[Any] = []
        self._requires_update: set[torch.Tensor] = set()
        self._synchronized = False
        self._should_synchronize = True

        if groups is not None:
            if not (isinstance(groups, list) or (isinstance(groups, int) and groups > 0)):
                raise ValueError("groups should be a non-negative integer or a list of list of torch.Tensor.")
            if isinstance(groups, list):
                seen: set[int] = set()
                for group in groups:
                    for p in group:
                        if not isinstance(p, torch.Tensor):
                            raise ValueError("groups must consist of torch.Tensor.")
                        if id(p) in seen:
                            raise ValueError("A parameter can only appear once in groups.")
                        seen.add(id(p))
        self._groups = groups
        self._p_to_group: dict[torch.Tensor, _Group] = {}
        self._group_counts: dict[_Group, int] = {}
        # Grouped allreduces are started in one fixed order on every rank (the engine numbers groups
        # in submission order): a group whose gradients are complete waits for those before it.
        self._group_order: list[_Group] = []
        self._groups_ready: set[_Group] = set()
        self._next_group = 0

        api.require_initialized()  # a clear error otherwise
        process_set_id(process_set)  # and the process set registered
        if self.process_set.included():
            self._register_hooks()

    # --- hooks: start allreduces during backward() ---------------------------------------------------

    def _register_hooks(self) -> None:
        params = [p for group in self.param_groups for p in group["params"] if p.requires_grad]
        if self._groups is not None:
            # Groups must be formed identically on every rank: follow rank 0's parameter order.
            order = broadcast_object(
                [self._parameter_names[p] for p in params],
                root_rank=0,
                name="DistributedOptimizer.parameter_order",
                process_set=self.process_set,
            )
            position = {name: i for i, name in enumerate(order)}
            params.sort(key=lambda p: position.get(self._parameter_names[p], len(position)))
            if isinstance(self._groups, list):
                requested = {id(p) for p in params}
                p_groups = [[p for p in group if id(p) in requested] for group in self._groups]
                grouped = {id(p) for group in p_groups for p in group}
                p_groups = [g for g in p_groups if g] + [[p] for p in params if id(p) not in grouped]
            else:
                p_groups = split_groups(params, self._groups)
            index = {p: i for i, p in enumerate(params)}
            # Backward produces the last layers' gradients first: start groups in that order.
            self._group_order = sorted(map(tuple, p_groups), key=lambda g: max(index[p] for p in g), reverse=True)
            for group in self._group_order:
                for p in group:
                    self._p_to_group[p] = group
                self._group_counts[group] = 0
        for p in params:
            self._requires_update.add(p)
            self._hook_handles.append(p.register_post_accumulate_grad_hook(self._make_hook(p)))

    def _make_hook(self, p: torch.Tensor) -> Any:
        # The hook lives on the parameter, which may outlive this optimizer: it holds the optimizer
        # weakly, and does nothing once the optimizer is gone (e.g. replaced by a new wrapper).
        optimizer = weakref.ref(self)

        def hook(*_: Any) -> None:
            live = optimizer()
            if live is not None:
                live._gradient_ready(p)

        return hook

    def _gradient_ready(self, p: torch.Tensor) -> None:
        """Called when backward() has accumulated ``p``'s gradient: start its allreduce, if due."""
        if p in self._handles and self._handles[p][0] is not None and self._allreduce_delay[p] <= 0:
            raise AssertionError(
                "Gradients were computed more than backward_passes_per_step times before call to step(). "
                "Increase backward_passes_per_step to accumulate gradients locally."
            )
        if p.grad is not None and p.grad.requires_grad:
            raise AssertionError(
                "DistributedOptimizer does not support gradients that require grad (create_graph=True)"
            )
        self._allreduce_delay[p] -= 1
        if self._allreduce_delay[p] > 0:
            self._handles[p] = (None, None)  # accumulating locally: nothing to send yet
            return
        if self._groups is None:
            self._handles[p] = self._allreduce_grad_async(p)
            return
        group = self._p_to_group[p]
        self._group_counts[group] += 1
        self._handles[p] = (None, None)
        if self._group_counts[group] == len(group):
            self._groups_ready.add(group)
            self._start_groups()

    def _start_groups(self, all_remaining: bool = False) -> None:
        """Starts the ready groups in the fixed order (or every remaining group, in synchronize)."""
        while self._next_group < len(self._group_order):
            group = self._group_order[self._next_group]
            if not all_remaining and group not in self._groups_ready:
                break
            for member in group:
                self._handles.pop(member, None)
            self._handles[group] = self._grouped_allreduce_grad_async(group)
            self._group_counts[group] = 0
            self._next_group += 1

    def _scale_factors(self) -> tuple[float, float]:
        if self.op == Average:
            # Split the averaging: 1/f before the sum, f/size after it (the engine divides by size).
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    @staticmethod
    def _ensure_grad(p: torch.Tensor) -> torch.Tensor:
        """``p``'s gradient, made first if it has none."""
        grad = p.grad
        if grad is None:
            # This rank computed no gradient (the parameter was unused in its forward pass), but
            # another rank may have: contribute zeros so that every rank submits the same tensors.
            grad = p.grad = torch.zeros_like(p)
        return grad

    def _allreduce_grad_async(self, p: torch.Tensor) -> tuple[Any, Any]:
        tensor = self._ensure_grad(p)
        name = self._parameter_names.get(p)
        if tensor.is_sparse:
            if not self.sparse_as_dense:
                return sparse_allreduce_async(tensor, name=name, op=self.op, process_set=self.process_set), None
            tensor = tensor.to_dense()
        compressed, ctx = self._compression.compress(p, tensor)
        prescale, postscale = self._scale_factors()
        handle = allreduce_async_(
            compressed,
            name=name,
            op=self.op,
            prescale_factor=prescale,
            postscale_factor=postscale,
            process_set=self.process_set,
        )
        return handle, ctx

    def _grouped_allreduce_grad_async(self, group: _Group) -> tuple[Any, Any]:
        grads = [self._ensure_grad(p) for p in group]
        compressed = [self._compression.compress(p, g) for p, g in zip(group, grads, strict=True)]
        tensors, ctxs = zip(*compressed, strict=True)
        prescale, postscale = self._scale_factors()
        handle = grouped_allreduce_async_(
            list(tensors),
            name=self._parameter_names.get(group[0]),
            op=self.op,
            prescale_factor=prescale,
            postscale_factor=postscale,
            process_set=self.process_set,
        )
        return handle, ctxs

    # --- synchronisation and step --------------------------------------------------------------------

    def synchronize(self) -> None:
        """Waits for every gradient's allreduce (starting those not started yet) and writes the
        results into the parameters' ``.grad``."""
        if not self.process_set.included():
            self._synchronized = True
            return
        # Start what has not been started: parameters without a gradient this step (unused in this
        # rank's forward pass) and those still accumulating, in the same order on every rank.
        if self._groups is None:
            started = {p for p, (handle, _) in self._handles.items() if handle is not None}
            for p in sorted(self._requires_update - started, key=lambda p: self._parameter_names[p]):
                self._handles[p] = self._allreduce_grad_async(p)
        else:
            self._start_groups(all_remaining=True)
            self._groups_ready.clear()
            self._next_group = 0

        try:
            for key, (handle, ctx) in self._handles.items():
                if isinstance(key, tuple):
                    for p, output, c in zip(key, synchronize(handle), ctx, strict=True):
                        self._allreduce_delay[p] = self.backward_passes_per_step
                        self._compression.write_result(p.grad, output, c)
                    continue
                output = synchronize(handle)
                self._allreduce_delay[key] = self.backward_passes_per_step
                if key.grad.is_sparse:
                    aggregated = self._compression.decompress(output, ctx)
                    if not aggregated.is_sparse:  # sparse_as_dense: back to the gradient's layout
                        aggregated = aggregated.to_sparse()
                    key.grad = aggregated.coalesce()
                else:
                    self._compression.write_result(key.grad, output, ctx)
        finally:  # after a failure too, so that the optimizer can be used again (elastic training)
            self._handles.clear()
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self) -> Iterator[None]:
        """Within this context ``step()`` does not synchronize; use it after an explicit
        ``synchronize()`` (e.g. to clip the averaged gradients before the step)::

            optimizer.synchronize()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            with optimizer.skip_synchronize():
                optimizer.step()
        """
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure: Any = None) -> Any:
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn(
                    "optimizer.step() called without optimizer.skip_synchronize() context after "
                    "optimizer.synchronize(). This can cause training slowdown. You may want to consider "
                    "using optimizer.skip_synchronize() context if you use optimizer.synchronize() in your code.",
                    stacklevel=2,
                )
            self.synchronize()
        self._synchronized = False
        return self._step_locally(closure)

    # torch wraps each optimizer class's step() to run step hooks and profiling: the wrapped class's
    # step already is, so this one is marked as done and the hooks run once, after synchronization.
    step.hooked = True  # type: ignore[attr-defined]  # a function attribute, which torch reads

    def _step_locally(self, closure: Any = None) -> Any:
        """The wrapped optimizer's own step, without any communication."""
        return super().step(closure)

    def zero_grad(self, set_to_none: bool = True) -> None:
        if self._handles:
            raise AssertionError(
                "optimizer.zero_grad() was called after loss.backward() but before optimizer.step() or "
                "optimizer.synchronize(). This is prohibited as it can cause a race condition."
            )
        return super().zero_grad(set_to_none=set_to_none)

    def load_state_dict(self, *args: Any, **kwargs: Any) -> None:
        # Horovod's signature: whatever the wrapped optimizer's load_state_dict takes.
        self._handles = {}
        self._synchronized = False
        self._should_synchronize = True
        self.set_backward_passes_per_step(self.backward_passes_per_step)
        self._groups_ready.clear()
        self._next_group = 0
        for group in self._group_counts:
            self._group_counts[group] = 0
        super().load_state_dict(*args, **kwargs)

    def __del__(self) -> None:
        for handle in getattr(self, "_hook_handles", ()):
            handle.remove()

    def set_backward_passes_per_step(self, passes: int) -> None:
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes


@shared_parameters
def DistributedOptimizer(
    optimizer: torch.optim.Optimizer,
    named_parameters: Any = None,
    compression: CompressorLike = Compression.none,
    backward_passes_per_step: int = 1,
    op: int = Average,
    gradient_predivide_factor: float = 1.0,
    num_groups: int = 0,
    groups: Any = None,
    sparse_as_dense: bool = False,
    process_set: ProcessSet = global_process_set,
) -> torch.optim.Optimizer:
    """Wraps ``optimizer`` so that gradients are averaged (``op``) over the ranks of ``process_set``.

    Each gradient is allreduced as soon as backward has computed it, overlapping communication with
    the rest of backward; ``step()`` waits for the allreduces, then takes the wrapped optimizer's step.
    The returned optimizer is an instance of a subclass of ``optimizer``'s class, sharing its
    parameter groups (and their options, such as the learning rate) and keeping its state.

    :param optimizer: the ``torch.optim`` optimizer to wrap, built on the model's parameters.
    :param named_parameters: ``model.named_parameters()``, naming each gradient's allreduce (the
        names must be the same on every rank). By default names come from the parameters' positions
        in ``optimizer.param_groups``, which must then be the same on every rank.
    :param compression: how gradients are compressed for the allreduce, e.g. ``Compression.fp16``
        to send them as float16 (default ``Compression.none``).
    :param backward_passes_per_step: the number of backward passes gradients are accumulated over
        locally before they are allreduced, on the last one (call ``step()`` after it); default 1.
    :param op: the reduction of the gradients: ``Average`` (the default) or ``Sum``; or ``Adasum``, which
        on more than one rank steps each parameter locally as soon as its gradient is ready and combines
        the ranks' changes (deltas) by Adasum (Horovod's delta optimizer: adasum_optimizer.py).
    :param gradient_predivide_factor: |shared|
    :param num_groups: deprecated name of ``groups`` as a number (warns with a DeprecationWarning).
    :param groups: gradients allreduced together, as one ``grouped_allreduce``: a number of groups
        (the parameters split into that many consecutive groups), or a list of lists of parameters,
        each list a group (parameters in no list are allreduced on their own). By default none.
    :param sparse_as_dense: allreduce sparse gradients (``nn.Embedding(sparse=True)``) as dense
        tensors instead of allgathering their indices and values.
    :param process_set: the ranks gradients are averaged over (default ``global_process_set``, every
        rank); every member must train.
    """
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if num_groups != 0:
        warnings.warn(
            "Parameter `num_groups` has been replaced by `groups` and will be removed in v0.23.0.",
            DeprecationWarning,
            stacklevel=2,
        )
        if groups is None:
            groups = num_groups
    behaviour: type[_DistributedOptimizer] = _DistributedOptimizer
    if op == Adasum and size() > 1:
        from horovod.torch.adasum_optimizer import _DistributedAdasumOptimizer  # (it builds on this module)

        behaviour = _DistributedAdasumOptimizer
    cls = type(optimizer.__class__.__name__, (behaviour, optimizer.__class__), {})
    wrapped: torch.optim.Optimizer = cls(
        optimizer.param_groups,
        named_parameters,
        compression,
        backward_passes_per_step,
        op,
        gradient_predivide_factor,
        groups,
        sparse_as_dense,
        process_set,
    )
    # Keep what the wrapped optimizer already had: its state (e.g. loaded from a checkpoint) and defaults.
    wrapped.state.update(optimizer.state)
    wrapped.defaults = dict(optimizer.defaults)
    return wrapped
