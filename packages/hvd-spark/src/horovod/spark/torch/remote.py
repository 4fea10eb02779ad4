"""The TorchEstimator's training function, run on every rank.

Each rank rebuilds the model and optimizer from what the driver sent, resumes from the run's
checkpoint in the Store when there is one, and trains on its shard with ``hvd.DistributedOptimizer``;
rank 0 writes a checkpoint after every epoch. Metrics are averaged over every rank's rows. Rank 0
returns the trained model, the optimizer's state and the history.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable
from typing import Any

import cloudpickle
import numpy as np
import torch

from horovod.spark.common.training import DataSpec
from horovod.spark.torch.losses import match_label, total_loss


@dataclasses.dataclass(frozen=True)
class OptimizerRecipe:
    """How to make the user's optimizer again for a copy of the model: its class, hyperparameters,
    parameter groups (as positions in ``model.parameters()``) and state."""

    cls: type
    defaults: dict[str, Any]
    groups: list[list[int]]
    state: dict[str, Any]

    @classmethod
    def of(cls, optimizer: Any, model: Any) -> OptimizerRecipe:
        index = {id(p): i for i, p in enumerate(model.parameters())}
        groups = [[index[id(p)] for p in group["params"]] for group in optimizer.param_groups]
        return cls(type(optimizer), dict(optimizer.defaults), groups, optimizer.state_dict())

    def make(self, model: Any) -> Any:
        params = list(model.parameters())
        optimizer = self.cls([{"params": [params[i] for i in group]} for group in self.groups], **self.defaults)
        optimizer.load_state_dict(self.state)  # the state names parameters by position in the groups
        return optimizer


@dataclasses.dataclass(frozen=True)
class TorchSpec:
    data: DataSpec
    run_id: str
    model: bytes  # cloudpickle of the model
    optimizer: OptimizerRecipe
    loss_fns: list[Callable[..., Any]]
    loss_weights: list[float] | None
    metrics: list[Callable[..., Any]]
    compression: Any
    input_shapes: list[list[int]] | None
    train_minibatch_fn: Callable[..., Any] | None
    epochs: int
    verbose: int


def _tensor(array: np.ndarray, shape: list[int] | None = None) -> torch.Tensor:
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    if tensor.is_floating_point() or tensor.dtype == torch.bool:
        tensor = tensor.float()
    return tensor.reshape(shape) if shape else tensor


def _outputs(result: Any) -> list[torch.Tensor]:
    return list(result) if isinstance(result, list | tuple) else [result]


class _Averages:
    """Sums of loss and metric values, weighted by each batch's rows (their weights), over the ranks."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.sums = torch.zeros(len(names) + 1, dtype=torch.float64)

    def add(self, values: list[float], rows: float) -> None:
        self.sums += torch.tensor([*(v * rows for v in values), rows], dtype=torch.float64)

    def result(self, hvd: Any, name: str, prefix: str) -> dict[str, float]:
        total = hvd.allreduce(self.sums, op=hvd.Sum, name=name)
        rows = float(total[-1]) or 1.0
        return {prefix + n: float(total[i]) / rows for i, n in enumerate(self.names)}


def _metric_names(spec: TorchSpec) -> list[str]:
    labels = spec.data.label_cols
    names: list[str] = []
    for metric in spec.metrics:
        base = getattr(metric, "__name__", type(metric).__name__)
        names += [base] if len(labels) == 1 else [f"{label}_{base}" for label in labels]
    return ["loss", *names]


def _metric_values(spec: TorchSpec, outputs: list[torch.Tensor], labels: list[torch.Tensor]) -> list[float]:
    values = []
    for metric in spec.metrics:
        for output, label in zip(outputs, labels, strict=True):
            values.append(float(metric(output, match_label(output, label))))
    return values


def _batch(
    spec: TorchSpec, batch: dict[str, np.ndarray]
) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
    features, labels, weights = spec.data.split(batch)
    shapes: list[list[int] | None] = list(spec.input_shapes) if spec.input_shapes else [None] * len(features)
    return (
        [_tensor(f, s) for f, s in zip(features, shapes, strict=True)],
        [_tensor(y) for y in labels],
        torch.from_numpy(weights).float(),
    )


def transform_outputs(outputs: Any, labels: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The model's outputs as a list, one per label (a single output becomes a list of one)."""
    return _outputs(outputs), labels


def default_minibatch(
    model: Any,
    optimizer: Any,
    transform: Callable[..., tuple[list[torch.Tensor], list[torch.Tensor]]],
    loss_fn: Callable[..., torch.Tensor],
    inputs: list[torch.Tensor],
    labels: list[torch.Tensor],
    weights: torch.Tensor,
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """One training step (Horovod's ``train_minibatch_fn`` signature); returns (outputs, loss)."""
    optimizer.zero_grad()
    outputs, labels = transform(model(*inputs), labels)
    loss = loss_fn(outputs, labels, weights)
    loss.backward()  # type: ignore[no-untyped-call]
    optimizer.step()
    return outputs, loss


def _restore(spec: TorchSpec, model: Any, optimizer: Any) -> list[dict[str, float]]:
    """The history so far, the model and optimizer restored, when the run has a checkpoint."""
    store = spec.data.store
    path = store.get_checkpoint_path(spec.run_id)
    if not store.exists(path):
        return []
    state = torch.load(io.BytesIO(store.read(path)), weights_only=False)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return list(state["history"])


def _checkpoint(spec: TorchSpec, model: Any, optimizer: Any, history: list[dict[str, float]]) -> None:
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "history": history}, buffer)
    spec.data.store.write(spec.data.store.get_checkpoint_path(spec.run_id), buffer.getvalue())


def train(spec: TorchSpec) -> dict[str, Any] | None:
    import horovod.torch as hvd

    hvd.init()
    try:
        return _train(spec, hvd)
    finally:
        hvd.shutdown()


def _train(spec: TorchSpec, hvd: Any) -> dict[str, Any] | None:
    rank, size = hvd.rank(), hvd.size()
    model = cloudpickle.loads(spec.model)
    optimizer = spec.optimizer.make(model)
    history = _restore(spec, model, optimizer)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    distributed = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters(), compression=spec.compression or hvd.Compression.none
    )

    def loss_fn(outputs: list[torch.Tensor], labels: list[torch.Tensor], weights: torch.Tensor) -> torch.Tensor:
        return total_loss(spec.loss_fns, spec.loss_weights, outputs, labels, weights)

    minibatch = spec.train_minibatch_fn or default_minibatch
    train_reader = spec.data.train_reader(rank, size)
    val_reader = spec.data.val_reader(rank, size)
    names = _metric_names(spec)
    for epoch in range(len(history), spec.epochs):
        model.train()
        averages = _Averages(names)
        for batch in spec.data.batches(train_reader, epoch, spec.data.train_steps(train_reader)):
            inputs, labels, weights = _batch(spec, batch)
            outputs, loss = minibatch(model, distributed, transform_outputs, loss_fn, inputs, labels, weights)
            outputs = _outputs(outputs)
            with torch.no_grad():
                averages.add([float(loss), *_metric_values(spec, outputs, labels)], float(weights.sum()))
        logs = averages.result(hvd, f"hvd_spark.train.{epoch}", "")
        if val_reader is not None:
            logs.update(_validate(spec, hvd, model, loss_fn, val_reader, epoch, names))
        history.append(logs)
        if rank == 0 and spec.data.store.saving_runs():
            _checkpoint(spec, model, optimizer, history)
            if spec.verbose:
                print(
                    f"epoch {epoch + 1}/{spec.epochs}: " + ", ".join(f"{k}={v:.4f}" for k, v in logs.items()),
                    flush=True,
                )
    if rank != 0:
        return None
    return {"model": cloudpickle.dumps(model), "optimizer_state": optimizer.state_dict(), "history": history}


def _validate(
    spec: TorchSpec,
    hvd: Any,
    model: Any,
    loss_fn: Callable[..., torch.Tensor],
    reader: Any,
    epoch: int,
    names: list[str],
) -> dict[str, float]:
    model.eval()
    averages = _Averages(names)
    with torch.no_grad():
        for batch in spec.data.batches(reader, 0, spec.data.val_steps(reader)):
            inputs, labels, weights = _batch(spec, batch)
            outputs = _outputs(model(*inputs))
            loss = loss_fn(outputs, labels, weights)
            averages.add([float(loss), *_metric_values(spec, outputs, labels)], float(weights.sum()))
    return averages.result(hvd, f"hvd_spark.val.{epoch}", "val_")
