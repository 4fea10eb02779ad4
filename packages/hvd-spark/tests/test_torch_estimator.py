"""TorchEstimator on a real local Spark: 2 ranks through horovod.spark.run train on digits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from digits import accuracy, digits_frames
from horovod.spark.common.store import LocalStore
from horovod.spark.torch import TorchEstimator, TorchModel


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.layers(features)


def correct(output: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    return (output.argmax(dim=1) == label).float().mean()


def make_estimator(store: LocalStore, **overrides: object) -> TorchEstimator:
    torch.manual_seed(0)
    model = Net()
    params = {
        "num_proc": 2,
        "store": store,
        "model": model,
        "optimizer": torch.optim.Adam(model.parameters(), lr=0.01),
        "loss": torch.nn.CrossEntropyLoss(),
        "metrics": [correct],
        "feature_cols": ["features"],
        "label_cols": ["label"],
        "validation": 0.2,
        "batch_size": 32,
        "epochs": 6,
        "verbose": 0,
        "random_seed": 1,
    }
    params.update(overrides)
    return TorchEstimator(**params)


@pytest.fixture(scope="module")
def frames(spark: object) -> tuple[object, object]:
    return digits_frames(spark)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> LocalStore:
    return LocalStore(str(tmp_path_factory.mktemp("torch-store")))


@pytest.fixture(scope="module")
def trained(frames: tuple[object, object], store: LocalStore) -> TorchModel:
    return make_estimator(store, run_id="digits").fit(frames[0])


def test_fit_learns_digits_with_validation_metrics(trained: TorchModel, frames: tuple[object, object]) -> None:
    history = trained.getHistory()
    assert len(history) == 6
    for epoch in history:
        assert set(epoch) == {"loss", "correct", "val_loss", "val_correct"}
    assert history[-1]["loss"] < history[0]["loss"]
    assert history[-1]["val_correct"] > 0.85
    assert accuracy(trained.transform(frames[1])) >= 0.9


def test_transform_adds_predictions_and_keeps_every_column(trained: TorchModel, frames: tuple[object, object]) -> None:
    predicted = trained.transform(frames[1])
    assert predicted.columns == ["features", "label", "label__output"]
    row = predicted.first()
    assert len(row["label__output"]) == 10
    assert predicted.count() == frames[1].count()


def test_save_and_load_give_the_same_predictions(
    trained: TorchModel, frames: tuple[object, object], tmp_path: object
) -> None:
    path = f"{tmp_path}/model"
    trained.save(path)
    loaded = TorchModel.load(path)
    assert loaded.getHistory() == trained.getHistory()
    assert loaded.getFeatureColumns() == ["features"]
    before = np.array([r["label__output"] for r in trained.transform(frames[1]).collect()])
    after = np.array([r["label__output"] for r in loaded.transform(frames[1]).collect()])
    np.testing.assert_allclose(before, after, rtol=1e-6)


def test_a_run_resumes_from_its_checkpoint(frames: tuple[object, object], store: LocalStore) -> None:
    first = make_estimator(store, run_id="resumed", epochs=2).fit(frames[0])
    assert store.exists(store.get_checkpoint_path("resumed"))
    resumed = make_estimator(store, run_id="resumed", epochs=3).fit(frames[0])
    history = resumed.getHistory()
    assert len(history) == 3
    assert history[:2] == first.getHistory()  # the first two epochs were restored, not trained again


def test_estimator_params_save_and_load(store: LocalStore, tmp_path: object) -> None:
    estimator = make_estimator(store, epochs=3)
    path = f"{tmp_path}/estimator"
    estimator.save(path)
    loaded = TorchEstimator.load(path)
    assert loaded.getEpochs() == 3
    assert loaded.getFeatureCols() == ["features"]
    assert isinstance(loaded.getModel(), Net)
    assert loaded.getStore().prefix_path == store.prefix_path


def test_a_missing_feature_column_is_named_before_training(frames: tuple[object, object], store: LocalStore) -> None:
    with pytest.raises(ValueError, match="pixels"):
        make_estimator(store, feature_cols=["pixels"]).fit(frames[0])


def test_a_string_column_is_refused_before_training(spark: object, store: LocalStore) -> None:
    df = spark.createDataFrame([("a", 1), ("b", 0)], ["features", "label"])  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="features"):
        make_estimator(store).fit(df)


def test_an_optimizer_for_another_model_is_refused(store: LocalStore, frames: tuple[object, object]) -> None:
    other = Net()
    with pytest.raises(ValueError, match="not the model's"):
        make_estimator(store, optimizer=torch.optim.SGD(other.parameters(), lr=0.1)).fit(frames[0])


def test_an_unwritable_store_is_refused_before_training(frames: tuple[object, object], tmp_path: object) -> None:
    blocker = f"{tmp_path}/a-file"
    with open(blocker, "w") as f:
        f.write("x")
    with pytest.raises(ValueError, match="a-file"):
        make_estimator(LocalStore(f"{blocker}/store")).fit(frames[0])


def test_fit_on_parquet_trains_on_data_already_in_the_store(
    frames: tuple[object, object], tmp_path_factory: pytest.TempPathFactory
) -> None:
    from pyspark.ml.functions import vector_to_array

    store = LocalStore(str(tmp_path_factory.mktemp("parquet-store")))
    train = frames[0].withColumn("features", vector_to_array("features", "float32"))  # type: ignore[attr-defined]
    train.write.parquet(store.get_train_data_path())
    model = make_estimator(store, validation=None, epochs=4).fit_on_parquet()
    assert len(model.getHistory()) == 4
    assert model.getFeatureSpecs()["features"].shape == (64,)
    assert accuracy(model.transform(frames[1])) >= 0.85


def recording(directory: str) -> object:
    """A transformation_fn that records the labels (row ids here) and weights each rank trains on."""

    def record(batch: dict) -> dict:
        import os
        import uuid

        with open(f"{directory}/{os.getpid()}.{uuid.uuid4().hex}.npz", "wb") as f:
            np.savez(f, ids=batch["label"], weights=batch["__weight__"])
        return batch

    return record


def test_every_row_is_trained_on_exactly_once_per_epoch(
    spark: object, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # 57 rows on 2 ranks: shards of 29 and 28 rows, 5 batches of 7 on each rank; the shorter shard's
    # last batch is one padding row of weight 0.
    seen = tmp_path_factory.mktemp("seen")
    rows = [([float(i % 5), 1.0], float(i)) for i in range(57)]
    df = spark.createDataFrame(rows, ["x", "label"])  # type: ignore[attr-defined]
    model = torch.nn.Linear(2, 1)
    TorchEstimator(
        num_proc=2,
        store=LocalStore(str(tmp_path_factory.mktemp("once-store"))),
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=1e-4),
        loss=torch.nn.MSELoss(),
        feature_cols=["x"],
        label_cols=["label"],
        batch_size=7,
        epochs=2,
        verbose=0,
        transformation_fn=recording(str(seen)),
    ).fit(df)
    batches = [np.load(path) for path in seen.iterdir()]
    assert len(batches) == 2 * 2 * 5  # epochs x ranks x steps
    ids = np.concatenate([b["ids"][b["weights"] > 0] for b in batches])
    padding = np.concatenate([b["ids"][b["weights"] == 0] for b in batches])
    assert sorted(ids.tolist()) == sorted([float(i) for i in range(57)] * 2)
    assert len(padding) == 2  # one per epoch
    assert max(len(b["ids"]) for b in batches) == 7


def frozen_step(model, optimizer, transform_outputs, loss_fn, inputs, labels, sample_weights):  # type: ignore[no-untyped-def]
    """A custom step that computes the loss but never updates the model."""
    outputs, labels = transform_outputs(model(*inputs), labels)
    return outputs, loss_fn(outputs, labels, sample_weights).detach()


def test_a_custom_train_minibatch_fn_replaces_the_training_step(
    spark: object, tmp_path_factory: pytest.TempPathFactory
) -> None:
    df = spark.createDataFrame([([float(i % 5), 1.0], float(i)) for i in range(40)], ["x", "label"])  # type: ignore[attr-defined]
    torch.manual_seed(3)
    model = torch.nn.Linear(2, 1)
    before = [p.detach().clone() for p in model.parameters()]
    fitted = TorchEstimator(
        num_proc=2,
        store=LocalStore(str(tmp_path_factory.mktemp("step-store"))),
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        loss=torch.nn.MSELoss(),
        feature_cols=["x"],
        label_cols=["label"],
        batch_size=8,
        epochs=2,
        verbose=0,
        train_minibatch_fn=frozen_step,
    ).fit(df)
    after = list(fitted.getModel().parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert fitted.getHistory()[0]["loss"] > 0  # the loss was computed and averaged all the same
