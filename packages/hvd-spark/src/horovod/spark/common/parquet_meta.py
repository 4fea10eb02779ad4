"""The DatasetMeta of Parquet data already in the Store (``fit_on_parquet``): from the metadata file
``prepare_data`` writes when there is one, else from the Parquet schema itself, so that data written
by another program (Spark's own ``df.write.parquet(store.get_train_data_path())``) trains too."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from horovod.spark.common.columns import ColumnSpec
from horovod.spark.common.data import META_FILE, DatasetMeta
from horovod.spark.common.fs_paths import join_path
from horovod.spark.common.reader import dataset_rows, list_parts

#: Rows looked at to find the length of a variable-length list column (the reader checks every row).
_SAMPLE_ROWS = 1024


def _element_type(data_type: pa.DataType) -> tuple[pa.DataType, int | None]:
    """The element type of a (possibly nested once) list type, and its fixed size when it has one."""
    if pa.types.is_fixed_size_list(data_type):
        return data_type.value_type, data_type.list_size
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        return data_type.value_type, None
    return data_type, None


def _numeric_dtype(name: str, data_type: pa.DataType) -> str:
    if pa.types.is_boolean(data_type):
        return "bool"
    if pa.types.is_integer(data_type) or pa.types.is_floating(data_type):
        return str(data_type.to_pandas_dtype().__name__)
    raise ValueError(
        f"column {name!r} has Parquet type {data_type}; the models take numbers, booleans and arrays of them"
    )


def _spec(name: str, schema: pa.Schema, first_file: Any) -> ColumnSpec:
    if name not in schema.names:
        raise ValueError(f"column {name!r} is not in the Parquet data; it has {schema.names}")
    data_type = schema.field(name).type
    element, size = _element_type(data_type)
    if element is data_type:
        return ColumnSpec(name, _numeric_dtype(name, data_type), ())
    if size is None:
        sample = first_file.read_row_group(0, columns=[name]).column(0).combine_chunks()[:_SAMPLE_ROWS]
        lengths = set(pc.list_value_length(sample).to_pylist())
        if len(lengths) != 1 or None in lengths:
            raise ValueError(f"column {name!r} has arrays of lengths {sorted(x for x in lengths if x is not None)}")
        size = lengths.pop()
    return ColumnSpec(name, _numeric_dtype(name, element), (int(size),))


def meta_from_store(store: Any, columns: Sequence[str]) -> DatasetMeta:
    """The training (and, when present, validation) data at the store's un-indexed paths."""
    train_path, val_path = store.get_train_data_path(), store.get_val_data_path()
    if not store.is_parquet_dataset(train_path):
        raise ValueError(f"fit_on_parquet: no Parquet dataset at {train_path}")
    meta_file = join_path(train_path, META_FILE)
    if store.exists(meta_file):
        return DatasetMeta.from_json(json.loads(store.read(meta_file)))
    filesystem = store.filesystem
    parts = list_parts(filesystem, store.get_localized_path(train_path))
    with filesystem.open_input_file(parts[0].path) as source:
        first = pq.ParquetFile(source)
        specs = {name: _spec(name, first.schema_arrow, first) for name in columns}
    has_val = store.is_parquet_dataset(val_path)
    return DatasetMeta(
        train_path=train_path,
        val_path=val_path if has_val else None,
        train_rows=dataset_rows(filesystem, store.get_localized_path(train_path)),
        val_rows=dataset_rows(filesystem, store.get_localized_path(val_path)) if has_val else 0,
        columns=specs,
        dataset_idx="",
    )
