"""A DataFrame made ready for training: checked, converted, split and written to the Store as Parquet.

Driver side. The ranks then stream their shards with :class:`~horovod.spark.common.reader.ShardReader`,
knowing the columns from :class:`DatasetMeta`. pyspark is imported inside the functions that use it,
so that the ranks can unpickle a :class:`DatasetMeta` without it.

The data is written once per DataFrame and options in a Spark session: the dataset index is a hash
of the DataFrame's plan and of the options, and a later fit with the same ones finds the data (and
its metadata file, written last) in the Store and reuses it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from horovod.spark.common.columns import (
    ARRAY,
    VECTOR,
    ColumnSpec,
    InputColumn,
    check_columns,
    check_validation,
    input_columns,
)
from horovod.spark.common.fs_paths import join_path
from horovod.spark.common.reader import dataset_rows, steps_per_epoch

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from horovod.spark.common.store import Store

__all__ = ["ColumnSpec", "DatasetMeta", "check_columns", "prepare_data", "steps_per_epoch"]

#: The metadata file, inside the training dataset's directory: Parquet readers skip names with "_".
META_FILE = "_hvd_meta.json"
_META_VERSION = 1
#: The column marking validation rows while the data is split; never written.
_IS_VAL = "__hvd_is_val__"


@dataclass(frozen=True)
class DatasetMeta:
    """Where a prepared dataset is and what it holds; picklable, for the ranks."""

    train_path: str
    val_path: str | None
    train_rows: int
    val_rows: int
    columns: dict[str, ColumnSpec] = field(hash=False)
    dataset_idx: str

    def steps_per_epoch(self, batch_size: int, num_proc: int, *, validation: bool = False) -> int:
        """Batches per epoch on each rank, as :class:`ShardReader` yields them."""
        return steps_per_epoch(self.val_rows if validation else self.train_rows, batch_size, num_proc)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": _META_VERSION,
            "train_path": self.train_path,
            "val_path": self.val_path,
            "train_rows": self.train_rows,
            "val_rows": self.val_rows,
            "columns": [spec.to_json() for spec in self.columns.values()],
            "dataset_idx": self.dataset_idx,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DatasetMeta:
        if data.get("version") != _META_VERSION:
            raise ValueError(f"dataset metadata version {data.get('version')!r} is not {_META_VERSION}")
        specs = [ColumnSpec.from_json(spec) for spec in data["columns"]]
        return cls(
            data["train_path"],
            data["val_path"],
            data["train_rows"],
            data["val_rows"],
            {spec.name: spec for spec in specs},
            data["dataset_idx"],
        )


def dataset_index(
    df: DataFrame,
    columns: Sequence[InputColumn],
    sample_weight_col: str | None,
    validation: float | str | None,
    seed: int,
) -> str:
    """A name for the data of ``df`` prepared with these options, the same for every fit in this session.

    ``semanticHash`` identifies the plan (for a file source, its paths: data changed in place is not
    noticed, hence ``prepare_data(reuse=False)``). It is a 32-bit hash, and not stable across Spark
    sessions for most sources (checked: local data and Parquet reads hash differently in a new
    session), so the application id is part of the key: another session never mistakes a colliding
    hash for its own data. The schema guards against collisions within a session.
    """
    key = {
        "app": df.sparkSession.sparkContext.applicationId,
        "plan": df.semanticHash(),
        "schema": df.schema.json(),
        "columns": [(c.name, c.role, c.dtype) for c in columns],
        "weight": sample_weight_col,
        "validation": validation,
        "seed": seed if isinstance(validation, float) else None,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def _converted(df: DataFrame, columns: Sequence[InputColumn], validation: float | str | None, seed: int) -> DataFrame:
    """Only the needed columns, as the models take them, plus the validation flag."""
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F

    selected: list[Column] = []
    for column in columns:
        value = F.col(column.name)
        if column.kind == VECTOR:
            value = vector_to_array(value, column.dtype)
        elif column.is_decimal:
            value = value.cast("array<double>" if column.kind == ARRAY else "double")
        selected.append(value.alias(column.name))
    if isinstance(validation, str):
        # Numbers cast to boolean: non-zero is true. A null flag is reported with the other nulls.
        selected.append(F.col(validation).cast("boolean").alias(_IS_VAL))
    elif validation is not None:
        selected.append((F.rand(seed) < F.lit(validation)).alias(_IS_VAL))
    return df.select(*selected)


def _check_values(df: DataFrame, columns: Sequence[InputColumn], validation: float | str | None) -> dict[str, Any]:
    """One aggregation job: row and validation counts, nulls per column, array lengths per column.

    Raises ValueError for nulls and for arrays whose length varies; returns the job's row.
    """
    from pyspark.sql import functions as F

    aggregates = [F.count(F.lit(1)).alias("rows")]
    if validation is not None:
        aggregates.append(F.sum(F.col(_IS_VAL).cast("long")).alias("val_rows"))
        aggregates.append(F.count_if(F.col(_IS_VAL).isNull()).alias(f"nulls:{_IS_VAL}"))
    for i, column in enumerate(columns):
        value = F.col(column.name)
        aggregates.append(F.count_if(value.isNull()).alias(f"nulls:{i}"))
        if column.kind in (ARRAY, VECTOR):
            aggregates.append(F.count_if(F.exists(value, lambda x: x.isNull())).alias(f"null_elements:{i}"))
            # size(null) is -1 or null depending on the ANSI settings: leave null rows out.
            length = F.when(value.isNotNull(), F.size(value))
            aggregates += [F.min(length).alias(f"min_len:{i}"), F.max(length).alias(f"max_len:{i}")]
    result = df.agg(*aggregates).collect()[0].asDict()
    if validation is not None and result[f"nulls:{_IS_VAL}"]:
        raise ValueError(f"validation column {validation!r} has {result[f'nulls:{_IS_VAL}']} null values")
    for i, column in enumerate(columns):
        _check_column_values(column, result, i)
    return result


def _check_column_values(column: InputColumn, result: dict[str, Any], i: int) -> None:
    what = f"{column.role} column {column.name!r}"
    if result[f"nulls:{i}"]:
        raise ValueError(f"{what} has {result[f'nulls:{i}']} null values; the models cannot take nulls")
    if column.kind not in (ARRAY, VECTOR) or not result["rows"]:
        return
    if result[f"null_elements:{i}"]:
        raise ValueError(f"{what} has {result[f'null_elements:{i}']} arrays with null elements")
    shortest, longest = result[f"min_len:{i}"], result[f"max_len:{i}"]
    if shortest != longest:
        raise ValueError(f"{what} has arrays of lengths {shortest} to {longest}; every row must have the same length")
    if shortest == 0:
        raise ValueError(f"{what} holds empty arrays")


def _column_specs(columns: Sequence[InputColumn], checked: dict[str, Any]) -> dict[str, ColumnSpec]:
    specs = {}
    for i, column in enumerate(columns):
        shape = (checked[f"max_len:{i}"],) if column.kind in (ARRAY, VECTOR) else ()
        specs[column.name] = ColumnSpec(column.name, column.dtype, shape)
    return specs


def _check_enough_rows(train_rows: int, val_rows: int, has_validation: bool, num_proc: int) -> None:
    """Every rank reads at least one row of each set it trains or validates on."""
    if train_rows < num_proc:
        raise ValueError(
            f"the training set has {train_rows} rows, fewer than num_proc={num_proc}: every rank needs at least one row"
        )
    if has_validation and val_rows < num_proc:
        raise ValueError(
            f"the validation set has {val_rows} rows, fewer than num_proc={num_proc}: every rank needs at least one "
            "validation row (use a larger validation fraction or fewer processes)"
        )


def _load_meta(store: Store, train_path: str, val_path: str | None, idx: str) -> DatasetMeta | None:
    """The metadata of data already prepared under these paths, or None if it is missing or incomplete."""
    meta_path = join_path(train_path, META_FILE)
    if not (store.exists(meta_path) and store.is_parquet_dataset(train_path)):
        return None
    if val_path is not None and not store.is_parquet_dataset(val_path):
        return None
    try:
        meta = DatasetMeta.from_json(json.loads(store.read(meta_path)))
    except (ValueError, KeyError, TypeError):
        return None  # written by another version: prepare again
    return meta if meta.dataset_idx == idx and meta.val_path == val_path else None


def _write(df: DataFrame, store: Store, path: str, partitions: int) -> int:
    """Write ``df`` as Parquet at ``path``; return its row count, read from the written footers."""
    df.repartition(partitions).write.mode("overwrite").parquet(store.get_full_path(path))
    return dataset_rows(store.filesystem, store.get_localized_path(path))


def prepare_data(
    df: DataFrame,
    store: Store,
    *,
    feature_cols: str | Sequence[str],
    label_cols: str | Sequence[str],
    sample_weight_col: str | None = None,
    validation: float | str | None = None,
    num_proc: int,
    partitions_per_process: int = 10,
    vector_dtype: str = "float64",
    seed: int = 0,
    reuse: bool = True,
) -> DatasetMeta:
    """Check ``df``, write the training (and validation) rows to ``store`` as Parquet, and describe them.

    ``validation``: a fraction (rows picked with ``rand(seed)``), or a boolean or numeric column whose
    true or non-zero rows are the validation set (that column is not written). Spark ML vectors become
    arrays of ``vector_dtype``. Data prepared before in this Spark session from the same DataFrame
    and options is reused unless ``reuse`` is false (for a source whose files changed in place).
    Raises ValueError for unsupported columns, nulls, arrays of varying length, an unwritable store,
    or fewer rows than ``num_proc`` in either set.
    """
    columns = input_columns(df, feature_cols, label_cols, sample_weight_col, vector_dtype)
    check_validation(df, validation, [c.name for c in columns])
    if num_proc < 1 or partitions_per_process < 1:
        raise ValueError(f"num_proc ({num_proc}) and partitions_per_process ({partitions_per_process}) must be >= 1")
    store.check_writable()
    idx = dataset_index(df, columns, sample_weight_col, validation, seed)
    train_path = store.get_train_data_path(idx)
    val_path = store.get_val_data_path(idx) if validation is not None else None
    if reuse:
        meta = _load_meta(store, train_path, val_path, idx)
        if meta is not None:
            _check_enough_rows(meta.train_rows, meta.val_rows, val_path is not None, num_proc)
            return meta
    return _prepare(df, store, columns, validation, seed, idx, num_proc * partitions_per_process, num_proc)


def _prepare(
    df: DataFrame,
    store: Store,
    columns: Sequence[InputColumn],
    validation: float | str | None,
    seed: int,
    idx: str,
    partitions: int,
    num_proc: int,
) -> DatasetMeta:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    train_path = store.get_train_data_path(idx)
    val_path = store.get_val_data_path(idx) if validation is not None else None
    prepared = _converted(df, columns, validation, seed)
    # Persisted for the check and the writes: the source is computed once, and the rand() split cannot
    # come out differently in the two writes (a row in both sets, or in neither).
    prepared.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        checked = _check_values(prepared, columns, validation)
        val_rows = checked.get("val_rows") or 0
        _check_enough_rows(checked["rows"] - val_rows, val_rows, val_path is not None, num_proc)
        if val_path is None:
            train_rows = _write(prepared, store, train_path, partitions)
        else:
            is_val = F.col(_IS_VAL)
            train_rows = _write(prepared.filter(~is_val).drop(_IS_VAL), store, train_path, partitions)
            val_rows = _write(prepared.filter(is_val).drop(_IS_VAL), store, val_path, partitions)
    finally:
        prepared.unpersist()
    _check_enough_rows(train_rows, val_rows, val_path is not None, num_proc)
    meta = DatasetMeta(train_path, val_path, train_rows, val_rows, _column_specs(columns, checked), idx)
    # Written last: its presence says that both sets are complete.
    store.write(join_path(train_path, META_FILE), json.dumps(meta.to_json(), indent=1).encode())
    return meta
