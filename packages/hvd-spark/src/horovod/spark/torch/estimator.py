"""``TorchEstimator`` and ``TorchModel``: PyTorch training on a DataFrame with Horovod."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import cloudpickle
import numpy as np

from horovod.spark.common import params as params_mod
from horovod.spark.common.estimator import HorovodEstimator, HorovodModel
from horovod.spark.common.training import data_spec

_TORCH_PARAMS = [
    params_mod.ParamSpec("input_shapes", "shape of each input tensor, batch dimension -1 first"),
    params_mod.ParamSpec("loss_constructors", "functions that make the losses (instead of loss)"),
    params_mod.ParamSpec(
        "train_minibatch_fn",
        "custom training step: fn(model, optimizer, transform_outputs, loss_fn, inputs, labels, sample_weights) "
        "-> (outputs, loss), as horovod.spark.torch.remote.default_minibatch",
    ),
]


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


class TorchEstimator(HorovodEstimator):
    """Spark Estimator for fitting PyTorch models to a DataFrame.

    :param num_proc: number of Horovod processes; defaults to ``spark.default.parallelism``.
    :param model: the ``torch.nn.Module`` to train; its ``forward`` takes one tensor per feature column.
    :param backend: Backend running the training (default ``SparkBackend(num_proc)``); not with num_proc.
    :param store: Store for the Parquet data, the runs and checkpoints.
    :param optimizer: a ``torch.optim`` optimizer made for ``model``'s parameters; each rank makes its own
        of the same class and state, wrapped in ``hvd.DistributedOptimizer``.
    :param loss: a loss (``torch.nn`` loss or function of (output, label)), or one per label column.
    :param loss_constructors: functions returning the losses, instead of ``loss``.
    :param metrics: functions of (output, label) returning a number, recorded every epoch.
    :param loss_weights: weights of the losses when there are several.
    :param sample_weight_col: column of per-row weights applied to the loss.
    :param gradient_compression: ``hvd.Compression`` of the gradients.
    :param feature_cols: columns fed to the model, in the order of ``forward``'s arguments.
    :param input_shapes: shape of each input, batch dimension first (``-1``).
    :param label_cols: label columns, one per output of the model.
    :param validation: a column (rows where true/1 validate) or a fraction of rows to validate on.
    :param batch_size: rows per batch on each process.
    :param val_batch_size: rows per validation batch (default ``batch_size``).
    :param epochs: number of epochs; a run with checkpoints resumes after its last finished one.
    :param verbose: 0 silent, 1 a line per epoch from rank 0.
    :param shuffle: shuffle the rows every epoch (default True).
    :param shuffle_buffer_size: rows held for shuffling on each process (default 10 batches).
    :param partitions_per_process: Parquet partitions written per process (default 10).
    :param run_id: the run's id in the store; a fit with the id of a run that has a checkpoint resumes it.
    :param train_minibatch_fn: custom training step, see the param's doc.
    :param train_steps_per_epoch: steps per epoch (default: the whole shard).
    :param validation_steps_per_epoch: validation steps per epoch (default: the whole shard).
    :param transformation_fn: function applied to each batch (dict of column name -> numpy array).
    :param random_seed: seed of shuffling and of the validation split.
    :param kwargs: the params above, by name (``TypeError`` for an unknown one); each can also be set later with its
        ``setX`` method.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    def _losses(self) -> list[Any]:
        constructors = self.getOrDefault("loss_constructors")
        if constructors:
            return [make() for make in _as_list(constructors)]
        return _as_list(self.getOrDefault("loss"))

    def _check_params(self) -> Any:
        if self.getOrDefault("loss") is None and self.getOrDefault("loss_constructors"):
            self._set(loss=self._losses())
        return super()._check_params()

    def _check_framework_params(self) -> None:
        import torch

        model, optimizer = self.getOrDefault("model"), self.getOrDefault("optimizer")
        if not isinstance(model, torch.nn.Module):
            raise ValueError(f"TorchEstimator: model must be a torch.nn.Module, not {type(model).__name__}")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise ValueError(
                f"TorchEstimator: optimizer must be a torch.optim.Optimizer, not {type(optimizer).__name__}"
            )
        own = {id(p) for p in model.parameters()}
        if any(id(p) not in own for group in optimizer.param_groups for p in group["params"]):
            raise ValueError("TorchEstimator: the optimizer was made for parameters that are not the model's")
        if self.getOrDefault("callbacks"):
            raise ValueError(
                "TorchEstimator: callbacks are Keras'; to change the PyTorch training step, give train_minibatch_fn"
            )
        losses, labels = self._losses(), self.getOrDefault("label_cols")
        if len(losses) not in (1, len(labels)):
            raise ValueError(
                f"TorchEstimator: {len(losses)} losses for {len(labels)} label columns (give 1 or one each)"
            )
        shapes, features = self.getOrDefault("input_shapes"), self.getOrDefault("feature_cols")
        if shapes is not None and len(shapes) != len(features):
            raise ValueError(f"TorchEstimator: {len(shapes)} input_shapes for {len(features)} feature columns")

    def _training_function(self, meta: Any, run_id: str, store: Any) -> Any:
        from horovod.spark.torch.remote import OptimizerRecipe, TorchSpec, train

        model, optimizer = self.getOrDefault("model"), self.getOrDefault("optimizer")
        spec = TorchSpec(
            data=data_spec(self, meta, store),
            run_id=run_id,
            model=cloudpickle.dumps(model),
            optimizer=OptimizerRecipe.of(optimizer, model),
            loss_fns=self._losses(),
            loss_weights=self.getOrDefault("loss_weights"),
            metrics=_as_list(self.getOrDefault("metrics") or []),
            compression=self.getOrDefault("gradient_compression"),
            input_shapes=self.getOrDefault("input_shapes"),
            train_minibatch_fn=self.getOrDefault("train_minibatch_fn"),
            epochs=int(self.getOrDefault("epochs")),
            verbose=int(self.getOrDefault("verbose")),
        )
        return functools.partial(train, spec)

    def _create_model(self, trained: Any, run_id: str, meta: Any) -> TorchModel:
        from horovod.spark.torch.remote import OptimizerRecipe

        model = cloudpickle.loads(trained["model"])
        recipe = OptimizerRecipe.of(self.getOrDefault("optimizer"), self.getOrDefault("model"))
        fresh = dataclasses.replace(recipe, state=trained["optimizer_state"]).make(model)
        return TorchModel(
            history=trained["history"],
            model=model,
            optimizer=fresh,
            feature_columns=self.getOrDefault("feature_cols"),
            label_columns=self.getOrDefault("label_cols"),
            run_id=run_id,
            loss=self._losses(),
            loss_constructors=self.getOrDefault("loss_constructors"),
            input_shapes=self.getOrDefault("input_shapes"),
            feature_specs={c: meta.columns[c] for c in self.getOrDefault("feature_cols")},
        )


params_mod.define_params(TorchEstimator, _TORCH_PARAMS)


class TorchModel(HorovodModel):
    """Spark Transformer wrapping a trained PyTorch model; ``getModel()`` gives the module.

    :param history: metrics of every epoch (a list of dicts; ``val_`` names from validation).
    :param model: the trained model.
    :param feature_columns: the feature columns.
    :param label_columns: the label columns.
    :param optimizer: the optimizer with its trained state.
    :param run_id: the run that trained the model.
    :param loss: the loss(es).
    :param loss_constructors: the loss constructors.
    :param kwargs: the params above, by name.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    def _payload(self) -> Any:
        return cloudpickle.dumps((self.getOrDefault("model"), self.getOrDefault("input_shapes")))

    @staticmethod
    def _predictor(payload: Any) -> Any:
        return _torch_predictor(payload)


params_mod.define_params(
    TorchModel,
    [
        params_mod.ParamSpec("optimizer", "the optimizer, with its trained state"),
        params_mod.ParamSpec("loss", "the loss(es) trained with"),
        params_mod.ParamSpec("loss_constructors", "the loss constructors trained with"),
        params_mod.ParamSpec("input_shapes", "shape of each input tensor"),
    ],
)


def _torch_predictor(payload: bytes) -> Any:
    import torch

    model, shapes = cloudpickle.loads(payload)
    model.eval()

    def predict(inputs: list[np.ndarray]) -> list[np.ndarray]:
        from horovod.spark.torch.remote import _outputs, _tensor

        tensors = [_tensor(x, s) for x, s in zip(inputs, shapes or [None] * len(inputs), strict=True)]
        with torch.no_grad():
            return [o.detach().cpu().numpy() for o in _outputs(model(*tensors))]

    return predict
