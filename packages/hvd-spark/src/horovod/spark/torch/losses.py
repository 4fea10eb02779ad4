"""Losses per sample, so that sample weights (and the zero weight of a padding row) apply.

A ``torch.nn`` loss is copied with ``reduction='none'``; a function is asked for
``reduction='none'`` when it takes it. A loss that still reduces the batch to one value is used as it
is where every weight is 1, and refused otherwise: weights could not enter it.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from typing import Any

import torch


def _per_sample_values(loss_fn: Callable[..., Any], output: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    if isinstance(loss_fn, torch.nn.modules.loss._Loss):
        unreduced = copy.copy(loss_fn)
        unreduced.reduction = "none"
        values: torch.Tensor = unreduced(output, label)
        return values
    try:
        takes_reduction = "reduction" in inspect.signature(loss_fn).parameters
    except (TypeError, ValueError):  # builtins without a signature
        takes_reduction = False
    result: torch.Tensor = loss_fn(output, label, reduction="none") if takes_reduction else loss_fn(output, label)
    return result


def match_label(output: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """A float label of one value per row, against an output of one column: the output's shape
    (so that e.g. MSELoss compares row with row instead of broadcasting)."""
    if label.is_floating_point() and label.shape != output.shape and label.numel() == output.numel():
        return label.view_as(output)
    return label


def weighted_loss(
    loss_fn: Callable[..., Any], output: torch.Tensor, label: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """The batch's loss: the weighted mean of the per-sample losses (0 when every weight is 0)."""
    label = match_label(output, label)
    values = _per_sample_values(loss_fn, output, label)
    if values.dim() == 0:
        if bool((weights == 1).all()):
            return values
        if bool((weights == 0).all()):
            return values * 0.0
        raise ValueError(
            f"loss {getattr(loss_fn, '__name__', type(loss_fn).__name__)} reduces the batch to one value, so sample "
            "weights cannot apply: give a torch.nn loss or a function taking reduction='none'"
        )
    per_sample = values.reshape(values.shape[0], -1).mean(dim=1)
    return (per_sample * weights).sum() / weights.sum().clamp_min(1e-12)


def total_loss(
    loss_fns: list[Callable[..., Any]],
    loss_weights: list[float] | None,
    outputs: list[torch.Tensor],
    labels: list[torch.Tensor],
    weights: torch.Tensor,
) -> torch.Tensor:
    """One loss per output (a single loss serves every output), combined with ``loss_weights``."""
    fns = loss_fns if len(loss_fns) == len(outputs) else loss_fns * len(outputs)
    scales = loss_weights or [1.0] * len(outputs)
    parts = [s * weighted_loss(f, o, y, weights) for f, o, y, s in zip(fns, outputs, labels, scales, strict=True)]
    return torch.stack(parts).sum()
