"""``HorovodEstimator`` and ``HorovodModel``: what the Torch and Keras Estimators share.

``fit(df)`` checks the params, writes the DataFrame to the Store as Parquet once (reused by later
fits on the same data), runs the framework's training function on every rank through the Backend,
and wraps rank 0's trained model in a Model. ``transform(df)`` adds a prediction column per label,
computed by a pandas UDF that loads the model once per partition.
"""

from __future__ import annotations

import uuid
from typing import Any

from pyspark.ml import Estimator, Model

from horovod.spark.common import params as params_mod
from horovod.spark.common.backend import Backend, SparkBackend
from horovod.spark.common.serialization import ParamsReadWrite


class HorovodEstimator(Estimator["HorovodModel"], ParamsReadWrite):
    """Trains a model on a DataFrame with Horovod; subclasses give the framework's training."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        params_mod.set_defaults(self)
        unknown = sorted(set(kwargs) - {p.name for p in self.params})
        if unknown:
            raise TypeError(f"{type(self).__name__}() got unknown params {unknown}")
        self._set(**kwargs)

    # --- what subclasses provide ----------------------------------------------------------------

    def _check_framework_params(self) -> None:
        """Raises ValueError for a framework param the training could not use."""

    def _training_function(self, meta: Any, run_id: str, store: Any) -> Any:
        """A picklable function every rank runs; rank 0 returns what ``_create_model`` takes."""
        raise NotImplementedError

    def _create_model(self, trained: Any, run_id: str, meta: Any) -> HorovodModel:
        raise NotImplementedError

    # --- fitting --------------------------------------------------------------------------------

    def _fit(self, dataset: Any) -> HorovodModel:
        from horovod.spark.common.data import prepare_data

        backend = self._check_params()
        meta = prepare_data(
            dataset,
            self.getOrDefault("store"),
            feature_cols=self.getOrDefault("feature_cols"),
            label_cols=self.getOrDefault("label_cols"),
            sample_weight_col=self.getOrDefault("sample_weight_col"),
            validation=self.getOrDefault("validation"),
            num_proc=backend.num_processes(),
            partitions_per_process=self.getOrDefault("partitions_per_process"),
            seed=int(self.getOrDefault("random_seed") or 0),
        )
        return self._fit_on_prepared_data(backend, meta)

    def fit_on_parquet(self, params: dict[Any, Any] | None = None) -> HorovodModel:
        """Trains on a Parquet dataset already at ``store.get_train_data_path()`` (and validates on
        the one at ``store.get_val_data_path()`` when there is one), with the same params as ``fit``.

        :param params: an optional param map overriding this estimator's params for this fit, as ``fit`` takes it.
        """
        from horovod.spark.common.parquet_meta import meta_from_store

        estimator = self.copy(params) if params else self
        backend = estimator._check_params()
        get = estimator.getOrDefault
        weight = [get("sample_weight_col")] if get("sample_weight_col") else []
        meta = meta_from_store(get("store"), [*get("feature_cols"), *get("label_cols"), *weight])
        return estimator._fit_on_prepared_data(backend, meta)

    def _fit_on_prepared_data(self, backend: Backend, meta: Any) -> HorovodModel:
        run_id = self.getOrDefault("run_id") or f"{type(self).__name__.lower()}_{uuid.uuid4().hex[:12]}"
        store = self.getOrDefault("store")
        trainer = self._training_function(meta, run_id, store.to_remote(run_id, meta.dataset_idx))
        results = backend.run(trainer)
        return self._create_model(results[0], run_id, meta)

    def _check_params(self) -> Backend:
        """Every param the training needs, checked before anything runs; the Backend to use."""
        for name in ("store", "model", "loss", "feature_cols", "label_cols"):
            if self.getOrDefault(name) in (None, []):
                raise ValueError(f"{type(self).__name__}: param {name!r} must be set")
        for name in ("batch_size", "epochs", "partitions_per_process"):
            if int(self.getOrDefault(name)) < 1:
                raise ValueError(f"{type(self).__name__}: {name}={self.getOrDefault(name)} must be at least 1")
        for name in ("val_batch_size", "train_steps_per_epoch", "validation_steps_per_epoch", "shuffle_buffer_size"):
            value = self.getOrDefault(name)
            if value is not None and int(value) < 1:
                raise ValueError(f"{type(self).__name__}: {name}={value} must be at least 1")
        backend, num_proc = self.getOrDefault("backend"), self.getOrDefault("num_proc")
        if backend is not None and num_proc is not None:
            raise ValueError(f"{type(self).__name__}: give num_proc or backend, not both")
        self._check_framework_params()
        return backend if backend is not None else SparkBackend(num_proc=num_proc, verbose=self.getOrDefault("verbose"))


params_mod.define_params(HorovodEstimator, params_mod.ESTIMATOR_PARAMS)


class HorovodModel(Model, ParamsReadWrite):
    """A trained model as a Spark Transformer; subclasses say how to predict."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        params_mod.set_defaults(self)
        self._set(**kwargs)

    def _payload(self) -> Any:
        """What travels to the executors to predict with (picklable, small)."""
        raise NotImplementedError

    @staticmethod
    def _predictor(payload: Any) -> Any:
        """``payload`` -> a function from a list of input arrays (one per feature) to a list of
        output arrays (one per label). Runs on the executors, once per partition."""
        raise NotImplementedError

    def output_columns(self) -> list[str]:
        return self.getOrDefault("output_cols") or [f"{c}__output" for c in self.getOrDefault("label_columns")]

    def _transform(self, dataset: Any) -> Any:
        from horovod.spark.common.predict import add_predictions

        return add_predictions(
            dataset,
            feature_columns=self.getOrDefault("feature_columns"),
            feature_specs=self.getOrDefault("feature_specs"),
            output_columns=self.output_columns(),
            predictor=type(self)._predictor,
            payload=self._payload(),
        )


params_mod.define_params(HorovodModel, params_mod.MODEL_PARAMS)
