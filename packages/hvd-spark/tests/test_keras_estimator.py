"""KerasEstimator on a real local Spark: 2 ranks through horovod.spark.run train a Keras 3 MLP on digits."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import pytest

from digits import accuracy, digits_frames
from horovod.spark.common.store import LocalStore
from horovod.spark.keras import KerasEstimator, KerasModel

EPOCHS = 8  # the last quarter of digits (other writers) reaches ~0.915 by then


def make_model() -> keras.Model:
    keras.utils.set_random_seed(0)
    inputs = keras.Input((64,), name="features")
    hidden = keras.layers.Dense(128, activation="relu")(inputs)
    return keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(hidden))


def make_estimator(store: LocalStore, **overrides: Any) -> KerasEstimator:
    params: dict[str, Any] = {
        "num_proc": 2,
        "store": store,
        "model": make_model(),
        "optimizer": keras.optimizers.Adam(0.01),
        "loss": "sparse_categorical_crossentropy",
        "metrics": ["accuracy"],
        "feature_cols": ["features"],
        "label_cols": ["label"],
        "validation": 0.2,
        "batch_size": 32,
        "epochs": EPOCHS,
        "verbose": 0,
        "random_seed": 1,
    }
    params.update(overrides)
    return KerasEstimator(**params)


@pytest.fixture(scope="module")
def frames(spark: object) -> tuple[Any, Any]:
    return digits_frames(spark)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> LocalStore:
    return LocalStore(str(tmp_path_factory.mktemp("keras-store")))


@pytest.fixture(scope="module")
def trained(frames: tuple[Any, Any], store: LocalStore) -> KerasModel:
    return make_estimator(store, run_id="digits").fit(frames[0])


def test_fit_learns_digits_with_validation_metrics(trained: KerasModel, frames: tuple[Any, Any]) -> None:
    history = trained.getHistory()
    assert len(history) == EPOCHS
    for epoch in history:
        assert set(epoch) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert history[-1]["loss"] < history[0]["loss"]
    assert history[-1]["val_accuracy"] > 0.85
    assert accuracy(trained.transform(frames[1])) >= 0.9


def test_the_trained_model_is_a_compiled_keras_model(trained: KerasModel) -> None:
    model = trained.getModel()
    assert isinstance(model, keras.Model)
    assert model.compiled
    assert isinstance(model.optimizer, keras.optimizers.Adam)
    assert int(model.optimizer.iterations.numpy()) > 0  # the trained optimizer state came back
    assert trained.getRunId() == "digits"
    assert trained.getFeatureColumns() == ["features"]
    assert trained.getLabelColumns() == ["label"]


def test_transform_adds_predictions_and_keeps_every_column(trained: KerasModel, frames: tuple[Any, Any]) -> None:
    predicted = trained.transform(frames[1])
    assert predicted.columns == ["features", "label", "label__output"]
    row = predicted.first()
    assert len(row["label__output"]) == 10
    assert sum(row["label__output"]) == pytest.approx(1.0, abs=1e-4)  # the softmax
    assert predicted.count() == frames[1].count()


def test_save_and_load_give_the_same_predictions(
    trained: KerasModel, frames: tuple[Any, Any], tmp_path: object
) -> None:
    path = f"{tmp_path}/model"
    trained.save(path)
    loaded = KerasModel.load(path)
    assert loaded.getHistory() == trained.getHistory()
    assert loaded.getFeatureColumns() == ["features"]
    assert isinstance(loaded.getModel(), keras.Model)
    before = [r["label__output"] for r in trained.transform(frames[1]).limit(20).collect()]
    after = [r["label__output"] for r in loaded.transform(frames[1]).limit(20).collect()]
    np.testing.assert_allclose(np.array(after), np.array(before), rtol=1e-5, atol=1e-6)


class EpochLog(keras.callbacks.Callback):
    """Notes every epoch a rank begins in a file: which epochs a fit trained."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        with open(self.path, "a") as f:
            f.write(f"{epoch}\n")


def epochs_logged(path: str) -> set[int]:
    with open(path) as f:
        return {int(line) for line in f}


def test_a_run_resumes_from_its_checkpoint(frames: tuple[Any, Any], store: LocalStore, tmp_path: Any) -> None:
    first_log, second_log = f"{tmp_path}/first", f"{tmp_path}/second"
    first = make_estimator(store, run_id="resumed", epochs=2, callbacks=[EpochLog(first_log)]).fit(frames[0])
    assert epochs_logged(first_log) == {0, 1}
    checkpoint = store.get_localized_path(store.get_checkpoint_path("resumed"))
    # The checkpoint is a .keras file that Keras opens by itself: weights and optimizer state.
    saved = keras.saving.load_model(_as_keras_file(checkpoint), compile=True)
    assert int(saved.optimizer.iterations.numpy()) > 0
    resumed = make_estimator(store, run_id="resumed", epochs=4, callbacks=[EpochLog(second_log)]).fit(frames[0])
    assert epochs_logged(second_log) == {2, 3}  # the first two epochs were restored, not trained again
    history = resumed.getHistory()
    assert len(history) == 4
    assert history[:2] == first.getHistory()
    assert history[3]["loss"] < history[1]["loss"]  # training went on from the restored weights


def _as_keras_file(path: str) -> str:
    """Keras tells formats by the suffix: a copy named ``.keras``."""
    import shutil

    copy = f"{path}.keras"
    shutil.copyfile(path, copy)
    return copy


class Scale(keras.layers.Layer):
    """A layer of the test's own, which a saved model needs custom_objects to load."""

    def __init__(self, factor: float = 2.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.factor = factor

    def call(self, x: Any) -> Any:
        return x * self.factor

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "factor": self.factor}


def test_estimator_params_save_and_load(store: LocalStore, tmp_path: object) -> None:
    inputs = keras.Input((64,), name="features")
    model = keras.Model(inputs, keras.layers.Dense(10)(Scale(3.0)(inputs)))
    estimator = make_estimator(
        store,
        model=model,
        custom_objects={"Scale": Scale},
        optimizer=keras.optimizers.SGD(0.05, momentum=0.5),
        epochs=3,
    )
    path = f"{tmp_path}/estimator"
    estimator.save(path)
    loaded = KerasEstimator.load(path)
    assert loaded.getEpochs() == 3
    assert loaded.getFeatureCols() == ["features"]
    assert loaded.getLoss() == "sparse_categorical_crossentropy"
    assert isinstance(loaded.getModel().layers[1], Scale)
    assert loaded.getModel().layers[1].factor == 3.0
    assert [w.shape for w in loaded.getModel().get_weights()] == [w.shape for w in model.get_weights()]
    optimizer = loaded.getOptimizer()
    assert isinstance(optimizer, keras.optimizers.SGD)
    assert optimizer.get_config()["momentum"] == 0.5
    assert float(optimizer.learning_rate.numpy()) == pytest.approx(0.05)
    assert loaded.getStore().prefix_path == store.prefix_path


def test_a_missing_feature_column_is_named_before_training(frames: tuple[Any, Any], store: LocalStore) -> None:
    with pytest.raises(ValueError, match="pixels"):
        make_estimator(store, feature_cols=["pixels"]).fit(frames[0])


def test_a_string_column_is_refused_before_training(spark: Any, store: LocalStore) -> None:
    df = spark.createDataFrame([("a", 1), ("b", 0)], ["features", "label"])
    with pytest.raises(ValueError, match="features"):
        make_estimator(store).fit(df)


def split_digits(df: Any) -> Any:
    """Digits as two inputs (the top and bottom halves, arrays) and two labels (the digit, and
    whether it is odd), with a sample weight that leaves the zeros out."""
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F

    pixels = vector_to_array("features")
    return df.select(
        F.slice(pixels, 1, 32).alias("top"),
        F.slice(pixels, 33, 32).alias("bottom"),
        "label",
        (F.col("label") % 2).cast("double").alias("odd"),
        F.when(F.col("label") == 0, 0.0).otherwise(1.0).alias("weight"),
    )


def test_two_inputs_two_outputs_and_sample_weights(frames: tuple[Any, Any], store: LocalStore) -> None:
    keras.utils.set_random_seed(0)
    top, bottom = keras.Input((32,), name="top"), keras.Input((32,), name="bottom")
    hidden = keras.layers.Dense(64, activation="relu")(keras.layers.Concatenate()([top, bottom]))
    digit = keras.layers.Dense(10, activation="softmax", name="digit")(hidden)
    odd = keras.layers.Dense(1, activation="sigmoid", name="odd")(hidden)
    estimator = make_estimator(
        store,
        model=keras.Model([top, bottom], [digit, odd]),
        feature_cols=["top", "bottom"],
        label_cols=["label", "odd"],
        loss=["sparse_categorical_crossentropy", "binary_crossentropy"],
        loss_weights=[1.0, 0.5],
        metrics=["accuracy"],  # a flat list: for every output
        sample_weight_col="weight",
        validation=None,
        epochs=3,
    )
    trained = estimator.fit(split_digits(frames[0]))
    history = trained.getHistory()
    assert len(history) == 3
    assert set(history[0]) == {"loss", "digit_loss", "odd_loss", "digit_accuracy", "odd_accuracy"}
    predicted = trained.transform(split_digits(frames[1]))
    assert predicted.columns[-2:] == ["label__output", "odd__output"]
    rows = predicted.collect()
    assert all(len(r["label__output"]) == 10 and 0.0 <= r["odd__output"] <= 1.0 for r in rows)
    guesses = np.array([np.argmax(r["label__output"]) for r in rows])
    labels = np.array([r["label"] for r in rows])
    assert (guesses == labels)[labels != 0].mean() > 0.8
    # The zeros weighed nothing in training: the model never learnt to answer 0.
    assert (guesses == 0)[labels == 0].mean() < 0.2


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"loss": ["sparse_categorical_crossentropy", "mse"]}, "2 losses for 1 label columns"),
        ({"loss_weights": [1.0, 0.5]}, "2 loss_weights for 1 label columns"),
        ({"optimizer": None}, "give an optimizer"),
        ({"model": "not a model"}, "model must be a Keras 3 keras.Model"),
        ({"feature_cols": ["features", "label"]}, "1 input"),
        ({"callbacks": [print]}, "keras.callbacks.Callback"),
    ],
)
def test_bad_params_are_refused_before_training(
    frames: tuple[Any, Any], store: LocalStore, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        make_estimator(store, **overrides).fit(frames[0])


def test_the_optimizer_of_a_compiled_model_serves_when_none_is_given(store: LocalStore) -> None:
    model = make_model()
    model.compile(optimizer=keras.optimizers.RMSprop(0.002), loss="sparse_categorical_crossentropy")
    estimator = make_estimator(store, model=model, optimizer=None)
    estimator._check_framework_params()
    assert isinstance(estimator._optimizer(), keras.optimizers.RMSprop)
