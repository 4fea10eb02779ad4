"""DistributedOptimizer(op=hvd.Adasum): Horovod's delta optimizer.

Adasum combines what each rank's optimizer would do, not its gradients: as soon as backward has a
parameter's gradient (after ``backward_passes_per_step`` passes), the wrapped optimizer steps that
parameter alone, the change it made (its delta) is combined over the ranks by Adasum, and
``step()`` sets the parameter to where it started plus the combination. So optimizers that scale
or normalise their steps (Adam, LAMB) see their own rank's gradients, and Adasum adapts the sum of
the ranks' steps to how far they agree.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from horovod.torch.mpi_ops import Adasum, allreduce_async_, grouped_allreduce_async_, synchronize
from horovod.torch.optimizer import _DistributedOptimizer, _Group


class _DistributedAdasumOptimizer(_DistributedOptimizer):
    """The behaviour added to the wrapped optimizer's class for ``op=Adasum`` (see DistributedOptimizer)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._starts: dict[torch.Tensor, torch.Tensor] = {}  # parameter -> its value before its local step

    # --- a parameter's local step and the allreduce of its delta ---------------------------------------

    def _step_alone(self, params: tuple[torch.Tensor, ...]) -> None:
        """The wrapped optimizer's step on ``params`` only (the others keep their values and state)."""
        wanted = {id(p) for p in params}
        stashed = [group["params"] for group in self.param_groups]
        for group in self.param_groups:
            group["params"] = [p for p in group["params"] if id(p) in wanted]
        try:
            self._step_locally()
        finally:
            for group, params_of_group in zip(self.param_groups, stashed, strict=True):
                group["params"] = params_of_group

    def _deltas(self, params: tuple[torch.Tensor, ...]) -> list[tuple[torch.Tensor, Any]]:
        """Steps ``params`` locally and leaves each one's delta in it: what to allreduce, and its context."""
        for p in params:
            start = self._starts.get(p)
            if start is None or start.shape != p.shape:
                start = self._starts[p] = torch.empty_like(p, requires_grad=False)
            start.copy_(p.detach())
        self._step_alone(params)
        compressed = []
        with torch.no_grad():
            for p in params:
                p.sub_(self._starts[p])
                compressed.append(self._compression.compress(p, p.data))
        return compressed

    def _allreduce_grad_async(self, p: torch.Tensor) -> tuple[Any, Any]:
        [(delta, ctx)] = self._deltas((p,))
        name = self._parameter_names.get(p)
        return allreduce_async_(delta, name=name, op=Adasum, process_set=self.process_set), ctx

    def _grouped_allreduce_grad_async(self, group: _Group) -> tuple[Any, Any]:
        deltas, ctxs = zip(*self._deltas(group), strict=True)
        name = self._parameter_names.get(group[0])
        return grouped_allreduce_async_(list(deltas), name=name, op=Adasum, process_set=self.process_set), ctxs

    # --- step: every delta combined, added to where its parameter started -------------------------------

    def synchronize(self) -> None:
        """Nothing to wait for before ``step()``, which applies the combined deltas (as Horovod's)."""

    def skip_synchronize(self) -> contextlib._GeneratorContextManager[None]:  # the base's type
        raise AssertionError("Skipping synchronization is not supported when using Adasum optimizer.")

    def step(self, closure: Any = None) -> Any:
        loss = closure() if closure is not None else None
        if not self.process_set.included():
            return loss
        self._start_remaining()
        try:
            for key, (handle, ctx) in self._handles.items():
                params = key if isinstance(key, tuple) else (key,)
                outputs = synchronize(handle) if isinstance(key, tuple) else [synchronize(handle)]
                contexts = ctx if isinstance(key, tuple) else (ctx,)
                with torch.no_grad():
                    for p, output, c in zip(params, outputs, contexts, strict=True):
                        start = self._starts[p]
                        start.add_(self._compression.decompress(output, c))
                        p.copy_(start)
                        self._allreduce_delay[p] = self.backward_passes_per_step
        finally:
            self._handles.clear()
        return loss

    step.hooked = True  # type: ignore[attr-defined]  # as _DistributedOptimizer.step: torch's hooks run once

    def _start_remaining(self) -> None:
        """Starts, in the same order on every rank, what backward did not: parameters without a
        gradient this step and those called before their last accumulated pass."""
        if self._groups is None:
            started = {p for p, (handle, _) in self._handles.items() if handle is not None}
            for p in sorted(self._requires_update - started, key=lambda p: self._parameter_names[p]):
                self._handles[p] = self._allreduce_grad_async(p)
            return
        self._start_groups(all_remaining=True)
        self._groups_ready.clear()
        self._next_group = 0
