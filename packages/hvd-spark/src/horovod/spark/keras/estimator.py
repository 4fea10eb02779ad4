"""``KerasEstimator`` and ``KerasModel``: Keras 3 training on a DataFrame with Horovod.

Keras objects travel in Keras' own forms rather than pickled: a model as its ``.keras`` file (with
``custom_objects`` to load it), an optimizer as its class and config (a fresh one per rank). Losses,
metrics and callbacks travel pickled (cloudpickle), as Horovod sends them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import cloudpickle
import numpy as np

from horovod.spark.common import params as params_mod
from horovod.spark.common.estimator import HorovodEstimator, HorovodModel
from horovod.spark.common.training import data_spec

_CUSTOM_OBJECTS = params_mod.ParamSpec(
    "custom_objects",
    "names of custom classes and functions of the model (and its loss and metrics), as Keras takes them",
)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _copy_metric(metric: Any) -> Any:
    """A metric for one more output: a Keras Metric object holds its running totals, so each output
    needs its own (a name or a plain function can be shared)."""
    import keras

    if isinstance(metric, keras.metrics.Metric):
        return type(metric).from_config(metric.get_config())
    return metric


def _count(model: Any, attribute: str) -> int | None:
    """How many inputs or outputs a model declares; None for a subclassed model not yet built."""
    try:
        return len(getattr(model, attribute))
    except (AttributeError, TypeError, ValueError):
        return None


class KerasEstimator(HorovodEstimator):
    """Spark Estimator for fitting Keras 3 models (``keras`` or ``tf.keras``) to a DataFrame.

    :param num_proc: number of Horovod processes; defaults to ``spark.default.parallelism``.
    :param model: the ``keras.Model`` to train, one input per feature column (in order), one output
        per label column.
    :param backend: Backend running the training (default ``SparkBackend(num_proc)``); not with num_proc.
    :param store: Store for the Parquet data, the runs and checkpoints.
    :param custom_objects: dict of the custom classes and functions the model's ``.keras`` file names.
    :param optimizer: a Keras optimizer (or its name); each rank makes a fresh one of the same class and
        config, wrapped in ``hvd.DistributedOptimizer``. Defaults to the optimizer of a compiled model.
    :param loss: a Keras loss (name, object or function), or a list with one per label column.
    :param loss_weights: weights of the losses when there are several.
    :param sample_weight_col: column of per-row weights applied to the loss.
    :param gradient_compression: ``hvd.Compression`` of the gradients.
    :param metrics: Keras metrics (names, objects or functions), recorded for every epoch; a flat list
        applies to every output.
    :param feature_cols: columns fed to the model, in the order of its inputs.
    :param label_cols: label columns, one per output of the model.
    :param validation: a column (rows where true/1 validate) or a fraction of rows to validate on.
    :param callbacks: Keras callbacks, run on every rank after Horovod's (the metrics they see are
        averaged over the ranks).
    :param batch_size: rows per batch on each process.
    :param val_batch_size: rows per validation batch (default ``batch_size``).
    :param epochs: number of epochs; a run with a checkpoint resumes after its last finished one.
    :param verbose: Keras' verbosity on rank 0 (0 silent, 1 progress bar, 2 a line per epoch).
    :param shuffle: shuffle the rows every epoch (default True).
    :param shuffle_buffer_size: rows held for shuffling on each process (default 10 batches).
    :param partitions_per_process: Parquet partitions written per process (default 10).
    :param run_id: the run's id in the store; a fit with the id of a run that has a checkpoint resumes it.
    :param train_steps_per_epoch: steps per epoch (default: the whole shard).
    :param validation_steps_per_epoch: validation steps per epoch (default: the whole shard).
    :param transformation_fn: function applied to each batch (dict of column name -> numpy array).
    :param train_reader_num_workers: accepted for Horovod's signature (each rank reads with one thread).
    :param val_reader_num_workers: accepted for Horovod's signature.
    :param random_seed: seed of shuffling and of the validation split.
    :param kwargs: the params above, by name (``TypeError`` for an unknown one); each can also be set later with its
        ``setX`` method.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    # --- params as the training takes them ------------------------------------------------------

    def _optimizer(self) -> Any:
        """The optimizer param (a name becomes Keras' optimizer of that name), else the model's own."""
        import keras

        optimizer = self.getOrDefault("optimizer")
        if isinstance(optimizer, str | dict):
            return keras.optimizers.get(optimizer)
        if optimizer is None:
            return getattr(self.getOrDefault("model"), "optimizer", None)
        return optimizer

    def _losses(self) -> list[Any]:
        return _as_list(self.getOrDefault("loss"))

    def _compile_loss(self) -> Any:
        """One loss for one label; else one per label (a single loss serves every label)."""
        losses, labels = self._losses(), self.getOrDefault("label_cols")
        if len(labels) == 1:
            return losses[0]
        return losses if len(losses) == len(labels) else losses * len(labels)

    def _compile_metrics(self) -> Any:
        """The metrics as ``compile`` takes them: Keras 3 wants one list per output of a model with
        several, where Horovod (and Keras 2) applied a flat list to every output."""
        metrics, labels = self.getOrDefault("metrics") or [], self.getOrDefault("label_cols")
        if isinstance(metrics, dict):
            return metrics
        metrics = _as_list(metrics)
        if len(labels) == 1 or any(isinstance(m, list | tuple) for m in metrics):
            return metrics
        return [metrics] + [[_copy_metric(m) for m in metrics] for _ in labels[1:]]

    # --- checks -----------------------------------------------------------------------------------

    def _check_framework_params(self) -> None:
        import keras

        model = self.getOrDefault("model")
        if not isinstance(model, keras.Model):
            raise ValueError(f"KerasEstimator: model must be a Keras 3 keras.Model, not {type(model).__name__}")
        optimizer = self._optimizer()
        if optimizer is None:
            raise ValueError("KerasEstimator: give an optimizer, or a model compiled with one")
        if not isinstance(optimizer, keras.optimizers.Optimizer):
            raise ValueError(f"KerasEstimator: optimizer must be a Keras 3 optimizer, not {type(optimizer).__name__}")
        self._check_counts(model)
        custom = self.getOrDefault("custom_objects")
        if custom is not None and not isinstance(custom, dict):
            raise ValueError(
                f"KerasEstimator: custom_objects must be a dict of name -> object, not {type(custom).__name__}"
            )
        for callback in self.getOrDefault("callbacks") or []:
            if not isinstance(callback, keras.callbacks.Callback):
                raise ValueError(
                    f"KerasEstimator: callbacks must be keras.callbacks.Callback objects, not {type(callback).__name__}"
                )

    def _check_counts(self, model: Any) -> None:
        """Losses, loss weights, inputs and outputs against the feature and label columns."""
        features, labels = self.getOrDefault("feature_cols"), self.getOrDefault("label_cols")
        losses = self._losses()
        if len(losses) not in (1, len(labels)):
            raise ValueError(
                f"KerasEstimator: {len(losses)} losses for {len(labels)} label columns (give 1 or one each)"
            )
        weights = self.getOrDefault("loss_weights")
        if isinstance(weights, list | tuple) and len(weights) != len(labels):
            raise ValueError(f"KerasEstimator: {len(weights)} loss_weights for {len(labels)} label columns")
        inputs, outputs = _count(model, "inputs"), _count(model, "outputs")
        if inputs is not None and inputs != len(features):
            raise ValueError(
                f"KerasEstimator: the model has {inputs} input(s) for {len(features)} feature column(s) {features}"
            )
        if outputs is not None and outputs != len(labels):
            raise ValueError(
                f"KerasEstimator: the model has {outputs} output(s) for {len(labels)} label column(s) {labels}"
            )

    # --- training ---------------------------------------------------------------------------------

    def _training_function(self, meta: Any, run_id: str, store: Any) -> Any:
        from horovod.spark.keras.remote import KerasSpec, OptimizerRecipe, model_to_bytes, train

        spec = KerasSpec(
            data=data_spec(self, meta, store),
            run_id=run_id,
            model=model_to_bytes(self.getOrDefault("model")),
            custom_objects=self.getOrDefault("custom_objects"),
            optimizer=OptimizerRecipe.of(self._optimizer()),
            loss=self._compile_loss(),
            loss_weights=self.getOrDefault("loss_weights"),
            metrics=self._compile_metrics(),
            callbacks=list(self.getOrDefault("callbacks") or []),
            compression=self.getOrDefault("gradient_compression"),
            epochs=int(self.getOrDefault("epochs")),
            verbose=int(self.getOrDefault("verbose")),
        )
        return functools.partial(train, spec)

    def _create_model(self, trained: Any, run_id: str, meta: Any) -> KerasModel:
        from horovod.spark.keras.remote import trained_model_from_bytes

        custom_objects = self.getOrDefault("custom_objects")
        return KerasModel(
            history=trained["history"],
            model=trained_model_from_bytes(trained["model"], custom_objects),
            feature_columns=self.getOrDefault("feature_cols"),
            label_columns=self.getOrDefault("label_cols"),
            custom_objects=custom_objects,
            run_id=run_id,
            feature_specs={c: meta.columns[c] for c in self.getOrDefault("feature_cols")},
        )

    # --- save/load --------------------------------------------------------------------------------

    def _encode_param(self, name: str, value: Any) -> bytes:
        return _encode_keras_param(name, value, super()._encode_param)

    def _decode_param(self, name: str, data: bytes) -> Any:
        return _decode_keras_param(self, name, data, super()._decode_param)


params_mod.define_params(KerasEstimator, [_CUSTOM_OBJECTS])


class KerasModel(HorovodModel):
    """Spark Transformer wrapping a trained Keras model; ``getModel()`` gives the ``keras.Model``.

    :param history: metrics of every epoch (a list of dicts; ``val_`` names from validation).
    :param model: the trained model (compiled as trained when its loss and metrics could be rebuilt).
    :param feature_columns: the feature columns, in the order of the model's inputs.
    :param label_columns: the label columns, in the order of its outputs.
    :param custom_objects: the custom classes and functions the model needs to load.
    :param run_id: the run that trained the model.
    :param kwargs: the params above, by name.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    def _payload(self) -> Any:
        from horovod.spark.keras.remote import model_to_bytes

        return cloudpickle.dumps((model_to_bytes(self.getOrDefault("model")), self.getOrDefault("custom_objects")))

    @staticmethod
    def _predictor(payload: Any) -> Any:
        return _keras_predictor(payload)

    def _encode_param(self, name: str, value: Any) -> bytes:
        return _encode_keras_param(name, value, super()._encode_param)

    def _decode_param(self, name: str, data: bytes) -> Any:
        return _decode_keras_param(self, name, data, super()._decode_param)


params_mod.define_params(KerasModel, [_CUSTOM_OBJECTS])


def _encode_keras_param(name: str, value: Any, default: Callable[[str, Any], bytes]) -> bytes:
    """A model as its ``.keras`` file; an optimizer as its class and config (pickling a built Keras
    optimizer drops its state with a warning); the rest as the base class encodes it."""
    from horovod.spark.keras.remote import OptimizerRecipe, model_to_bytes

    if name == "model" and value is not None:
        return model_to_bytes(value)
    if name == "optimizer" and value is not None and not isinstance(value, str | dict):
        recipe: bytes = cloudpickle.dumps(OptimizerRecipe.of(value))
        return recipe
    return default(name, value)


def _decode_keras_param(instance: Any, name: str, data: bytes, default: Callable[[str, bytes], Any]) -> Any:
    from horovod.spark.keras.remote import OptimizerRecipe, trained_model_from_bytes

    # Params load in the order of their names: custom_objects is set before model and optimizer.
    custom_objects = instance.getOrDefault("custom_objects")
    if name == "model":
        return trained_model_from_bytes(data, custom_objects)
    value = default(name, data)
    if name == "optimizer" and isinstance(value, OptimizerRecipe):
        return value.make(custom_objects)
    return value


def _outputs(result: Any, model: Any) -> list[np.ndarray]:
    if isinstance(result, dict):
        return [np.asarray(result[name]) for name in model.output_names]
    return [np.asarray(r) for r in result] if isinstance(result, list | tuple) else [np.asarray(result)]


def _keras_predictor(payload: bytes) -> Any:
    from horovod.spark.keras.remote import model_from_bytes, quiet_numpy_copy_warning

    data, custom_objects = cloudpickle.loads(payload)
    model = model_from_bytes(data, custom_objects, compile=False)

    def predict(inputs: list[np.ndarray]) -> list[np.ndarray]:
        with quiet_numpy_copy_warning():
            result = model.predict_on_batch(inputs[0] if len(inputs) == 1 else list(inputs))
        return _outputs(result, model)

    return predict
