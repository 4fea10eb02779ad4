"""The Spark ML params of the Estimators and their Models, with Horovod's accessors.

Each param is a ``pyspark.ml.param.Param`` on the class, with ``setX``/``getX`` methods named as
Horovod names them (``batch_size`` -> ``setBatchSize``/``getBatchSize``), made here from one table
instead of written out per param.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pyspark.ml.param import Param, Params, TypeConverters


@dataclasses.dataclass(frozen=True)
class ParamSpec:
    name: str
    doc: str
    default: Any = None
    converter: Any = None  # a pyspark TypeConverter, or None for any object


def camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def define_params(cls: type[Params], specs: list[ParamSpec]) -> None:
    """Adds each param and its ``setX``/``getX`` to ``cls`` (a Params subclass)."""
    for spec in specs:
        converter = spec.converter or TypeConverters.identity
        setattr(cls, spec.name, Param(Params._dummy(), spec.name, spec.doc, typeConverter=converter))
        setter = _setter(spec.name)
        setter.__doc__ = f"{setter.__doc__}\n\n:param value: the new value: {spec.doc}."
        setattr(cls, f"set{camel(spec.name)}", setter)
        setattr(cls, f"get{camel(spec.name)}", _getter(spec.name))
    cls._param_defaults = {**getattr(cls, "_param_defaults", {}), **{s.name: s.default for s in specs}}  # type: ignore[attr-defined]


def _setter(name: str) -> Any:
    def set_value(self: Params, value: Any) -> Params:
        return self._set(**{name: value})

    set_value.__name__ = f"set{camel(name)}"
    set_value.__doc__ = f"Sets ``{name}``; returns this object."
    return set_value


def _getter(name: str) -> Any:
    def get_value(self: Params) -> Any:
        return self.getOrDefault(getattr(self, name))

    get_value.__name__ = f"get{camel(name)}"
    get_value.__doc__ = f"The value of ``{name}``."
    return get_value


def set_defaults(instance: Params) -> None:
    instance._setDefault(**type(instance)._param_defaults)  # type: ignore[attr-defined]


_int = TypeConverters.toInt
_str = TypeConverters.toString
_strs = TypeConverters.toListString

#: The params every Estimator has (Horovod's, plus ``shuffle`` and ``random_seed``).
ESTIMATOR_PARAMS = [
    ParamSpec("num_proc", "number of Horovod processes; defaults to spark.default.parallelism"),
    ParamSpec("backend", "Backend running the training function; defaults to SparkBackend(num_proc)"),
    ParamSpec("store", "Store for the intermediate Parquet data, the runs and their checkpoints"),
    ParamSpec("model", "the model to train"),
    ParamSpec("optimizer", "the optimizer, made into an hvd.DistributedOptimizer for training"),
    ParamSpec("loss", "loss, or a list of losses (one per label column)"),
    ParamSpec("loss_weights", "weights of the losses when there are several"),
    ParamSpec("sample_weight_col", "column holding each row's weight in the loss"),
    ParamSpec("gradient_compression", "gradient compression for hvd.DistributedOptimizer"),
    ParamSpec("metrics", "metrics recorded for every epoch", []),
    ParamSpec("feature_cols", "columns fed to the model, in the order of its inputs", None, _strs),
    ParamSpec("label_cols", "label columns, one per output of the model", None, _strs),
    ParamSpec("validation", "a validation column (rows where it is true or 1), or the fraction of rows to validate on"),
    ParamSpec("callbacks", "callbacks of the training loop", []),
    ParamSpec("batch_size", "rows per batch, per process", 32, _int),
    ParamSpec("val_batch_size", "rows per validation batch; defaults to batch_size", None),
    ParamSpec("epochs", "number of epochs to train", 1, _int),
    ParamSpec("verbose", "verbosity, 0 to 2", 1, _int),
    ParamSpec("shuffle", "shuffle the training rows in every epoch", True, TypeConverters.toBoolean),
    ParamSpec("shuffle_buffer_size", "rows held for shuffling, per process; defaults to 10 batches", None),
    ParamSpec("partitions_per_process", "Parquet partitions written per process", 10, _int),
    ParamSpec("run_id", "the run's id in the store; made up when not given; a run resumes from its checkpoint", None),
    ParamSpec("train_steps_per_epoch", "training steps per epoch; defaults to the whole shard", None),
    ParamSpec("validation_steps_per_epoch", "validation steps per epoch; defaults to the whole shard", None),
    ParamSpec("transformation_fn", "function applied to every batch (a dict of column -> array) before the model"),
    ParamSpec("train_reader_num_workers", "accepted for Horovod's signature: each rank reads with one thread", 1),
    ParamSpec("val_reader_num_workers", "accepted for Horovod's signature: each rank reads with one thread", 1),
    ParamSpec("random_seed", "seed of the shuffling and the validation split", None),
]

#: The params every trained Model has.
MODEL_PARAMS = [
    ParamSpec("history", "metrics of every epoch: a list of dicts", []),
    ParamSpec("model", "the trained model"),
    ParamSpec("feature_columns", "the feature columns, in the order of the model's inputs", None, _strs),
    ParamSpec("label_columns", "the label columns", None, _strs),
    ParamSpec("output_cols", "prediction columns; default <label>__output", None, _strs),
    ParamSpec("run_id", "the id of the run that trained the model", None),
    ParamSpec("feature_specs", "dtype and shape of each feature column, as prepared for training", None),
]
