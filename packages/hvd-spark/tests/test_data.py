"""prepare_data with a real local Spark: checks, conversion, splits, the Parquet written, and reuse."""

from __future__ import annotations

import decimal
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from horovod.spark.common.data import META_FILE, ColumnSpec, DatasetMeta, check_columns, prepare_data
from horovod.spark.common.reader import WEIGHT_KEY, ShardReader
from horovod.spark.common.store import LocalStore

pytestmark = pytest.mark.timeout(600)

ROWS = 60


def is_val(i: int) -> bool:
    return i % 5 == 0


@pytest.fixture(scope="module")
def df(spark: Any) -> Any:
    """Vectors (dense and sparse rows), an array<float>, int and decimal labels, a weight, a boolean
    validation flag, and a string column that is not used."""
    from pyspark.ml.linalg import Vectors, VectorUDT
    from pyspark.sql import types as T

    schema = T.StructType(
        [
            T.StructField("id", T.LongType()),
            T.StructField("features", VectorUDT()),
            T.StructField("arr", T.ArrayType(T.FloatType())),
            T.StructField("label", T.IntegerType()),
            T.StructField("dec", T.DecimalType(10, 2)),
            T.StructField("weight", T.DoubleType()),
            T.StructField("is_val", T.BooleanType()),
            T.StructField("name", T.StringType()),
        ]
    )
    rows = [
        (
            i,
            Vectors.dense([i, 0.5, -i]) if i % 2 else Vectors.sparse(3, {0: float(i), 2: float(-i)}),
            [float(i), 2.0 * i],
            i % 3,
            decimal.Decimal(i) / 4,
            1.0 + i % 2,
            is_val(i),
            f"row {i}",
        )
        for i in range(ROWS)
    ]
    return spark.createDataFrame(rows, schema)


def expected_features(i: int) -> list[float]:
    return [float(i), 0.5 if i % 2 else 0.0, float(-i)]


def read_all(meta: DatasetMeta, store: LocalStore, path: str, weight_col: str | None = None) -> dict[str, np.ndarray]:
    """Every row of the dataset through two ranks' ShardReaders, in file order."""
    batches = []
    for rank in range(2):
        reader = ShardReader(
            store.filesystem,
            store.get_localized_path(path),
            meta.columns,
            rank,
            2,
            7,
            shuffle=False,
            weight_col=weight_col,
        )
        batches += [b for b in reader.epoch(0) if b[WEIGHT_KEY].all()]
    return {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}


def data_files(store: LocalStore, path: str) -> dict[str, int]:
    """The dataset's files with their modification times."""
    return {f: os.stat(f).st_mtime_ns for f in store.list_files(path)}


def test_prepare_with_validation_column(df: Any, tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path / "store"))
    cols: dict[str, Any] = {
        "feature_cols": ["id", "features", "arr"],
        "label_cols": ["label", "dec"],
        "sample_weight_col": "weight",
        "validation": "is_val",
        "num_proc": 2,
    }
    meta = prepare_data(df, store, **cols, partitions_per_process=2)
    val_ids = [i for i in range(ROWS) if is_val(i)]
    assert (meta.train_rows, meta.val_rows) == (ROWS - len(val_ids), len(val_ids))
    assert meta.columns == {
        "id": ColumnSpec("id", "int64", ()),
        "features": ColumnSpec("features", "float64", (3,)),
        "arr": ColumnSpec("arr", "float32", (2,)),
        "label": ColumnSpec("label", "int32", ()),
        "dec": ColumnSpec("dec", "float64", ()),
        "weight": ColumnSpec("weight", "float64", ()),
    }
    assert meta.val_path is not None and meta.train_path == store.get_train_data_path(meta.dataset_idx)
    # Only the needed columns are written: no validation flag, no unused string.
    parts = [f for f in store.list_files(meta.train_path) if f.endswith(".parquet")]
    assert len(parts) == 2 * 2  # num_proc * partitions_per_process
    written = pq.read_schema(parts[0]).names
    assert sorted(written) == sorted(meta.columns)
    assert meta.steps_per_epoch(7, 2) == 4 and meta.steps_per_epoch(7, 2, validation=True) == 1

    for path, ids in ((meta.train_path, [i for i in range(ROWS) if not is_val(i)]), (meta.val_path, val_ids)):
        data = read_all(meta, store, path, weight_col="weight")
        order = np.argsort(data["id"])
        assert data["id"][order].tolist() == ids
        np.testing.assert_array_equal(data["features"][order], [expected_features(i) for i in ids])
        np.testing.assert_array_equal(data["arr"][order], np.array([[i, 2 * i] for i in ids], np.float32))
        np.testing.assert_array_equal(data["label"][order], [i % 3 for i in ids])
        np.testing.assert_array_equal(data["dec"][order], [i / 4 for i in ids])
        np.testing.assert_array_equal(data[WEIGHT_KEY][order], [1.0 + i % 2 for i in ids])

    # A second fit with the same DataFrame and options reuses the files written by the first.
    before = data_files(store, meta.train_path) | data_files(store, meta.val_path)
    again = prepare_data(df, store, **cols, partitions_per_process=3)
    assert again == meta
    assert data_files(store, meta.train_path) | data_files(store, meta.val_path) == before
    # Not when told so, nor with other options.
    fresh = prepare_data(df, store, **cols, partitions_per_process=2, reuse=False)
    assert fresh == meta and set(store.list_files(meta.train_path)) != set(before)
    other = prepare_data(df, store, **{**cols, "label_cols": ["label"]}, partitions_per_process=2)
    assert other.dataset_idx != meta.dataset_idx and "dec" not in other.columns
    assert store.exists(f"{meta.train_path}/{META_FILE}")


def test_validation_fraction(spark: Any, tmp_path: Path) -> None:
    from pyspark.ml.linalg import Vectors

    rows = 600
    frame = spark.createDataFrame([(i, Vectors.dense([i, 1.0]), float(i % 2)) for i in range(rows)], ["id", "x", "y"])
    store = LocalStore(str(tmp_path / "store"))
    meta = prepare_data(
        frame,
        store,
        feature_cols=["id", "x"],
        label_cols="y",
        validation=0.25,
        num_proc=3,
        vector_dtype="float32",
        partitions_per_process=2,
    )
    assert meta.columns["x"] == ColumnSpec("x", "float32", (2,))
    assert meta.train_rows + meta.val_rows == rows
    assert 0.15 * rows < meta.val_rows < 0.35 * rows
    assert meta.val_path is not None
    train = read_all(meta, store, meta.train_path)["id"]
    val = read_all(meta, store, meta.val_path)["id"]
    assert sorted(train.tolist() + val.tolist()) == list(range(rows))  # each row in exactly one set
    # The seed picks the rows: another seed, another dataset.
    reseeded = prepare_data(
        frame,
        store,
        feature_cols=["id", "x"],
        label_cols="y",
        validation=0.25,
        num_proc=3,
        seed=1,
        partitions_per_process=2,
    )
    assert reseeded.dataset_idx != meta.dataset_idx


def _raises(match: str, df: Any, store: LocalStore, **kwargs: Any) -> None:
    options = {"feature_cols": ["features"], "label_cols": ["label"], "num_proc": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        prepare_data(df, store, **options)


def test_column_errors_before_any_job(spark: Any, df: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    store = LocalStore(str(tmp_path / "store"))
    frame = df.withColumn("m", F.create_map(F.lit("a"), F.col("id"))).withColumn("s", F.struct("id", "label"))
    frame = frame.withColumn("nested", F.array(F.col("arr"))).withColumn("bin", F.col("name").cast("binary"))
    spark.sparkContext.setJobGroup("column-checks", "no job may run")
    try:
        _raises(
            r"feature column 'nope' is not in the DataFrame; its columns are: id, features, arr",
            frame,
            store,
            feature_cols=["features", "nope"],
        )
        _raises(r"label column 'lbl' is not in the DataFrame", frame, store, label_cols="lbl")
        for column, type_name in (
            ("name", "string"),
            ("m", "map<string,bigint>"),
            ("s", "struct<id:bigint,label:int>"),
            ("nested", "array<array<float>>"),
            ("bin", "binary"),
        ):
            _raises(
                rf"feature column '{column}' has type {type_name}.*supported: numeric",
                frame,
                store,
                feature_cols=["features", column],
            )
        _raises("feature_cols is empty", frame, store, feature_cols=[])
        _raises("label_cols is empty", frame, store, label_cols=[])
        _raises(r"validation column 'nope' is not in the DataFrame", frame, store, validation="nope")
        _raises(r"validation column 'name' has type string", frame, store, validation="name")
        _raises(r"validation column 'label' is also a feature", frame, store, validation="label")
        for fraction in (0.0, 1.0, 1.5, -0.1):
            _raises(r"validation fraction .* is not in \(0, 1\)", frame, store, validation=fraction)
        _raises("sample weight column 'arr' must hold one number", frame, store, sample_weight_col="arr")
        with pytest.raises(ValueError, match="feature column 'name'"):
            check_columns(frame, ["name"], ["label"])
        check_columns(frame, "features", ["label", "dec"], "weight", "is_val")
        assert spark.sparkContext.statusTracker().getJobIdsForGroup("column-checks") == []
    finally:
        spark.sparkContext.setJobGroup("other", "")


def test_value_errors(spark: Any, tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path / "store"))
    varying = spark.createDataFrame(
        [([1.0, 2.0, 3.0], 1), ([1.0] * 5, 0), ([2.0] * 4, 1)], "features array<double>, label int"
    )
    _raises(
        r"feature column 'features' has arrays of lengths 3 to 5; every row must have the same length", varying, store
    )
    nulls = spark.createDataFrame([(1.0, 1), (None, 0), (None, 1)], "features double, label int")
    _raises(r"feature column 'features' has 2 null values", nulls, store)
    null_elements = spark.createDataFrame([([1.0, None], 1), ([1.0, 2.0], 0)], "features array<double>, label int")
    _raises(r"feature column 'features' has 1 arrays with null elements", null_elements, store)
    null_flags = spark.createDataFrame([(1.0, 1, True), (2.0, 0, None)], "features double, label int, v boolean")
    _raises(r"validation column 'v' has 1 null values", null_flags, store, validation="v")
    few = spark.createDataFrame([(1.0, 1), (2.0, 0), (3.0, 1)], "features double, label int")
    _raises(r"the training set has 3 rows, fewer than num_proc=4", few, store, num_proc=4)
    few_val = spark.createDataFrame([(1.0, 1, 1), (2.0, 0, 0), (3.0, 0, 0)], "features double, label int, v int")
    _raises(r"the validation set has 1 rows, fewer than num_proc=2", few_val, store, validation="v")
    # Nothing was written for data that was refused.
    assert store.list_files(store.prefix_path) == []


def test_unwritable_store(df: Any, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("a file, not a directory")
    store = LocalStore(str(tmp_path / "file" / "store"))
    _raises(rf"store prefix path file://{tmp_path}/file/store is not writable", df, store)
