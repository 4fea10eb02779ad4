"""Predictions as DataFrame columns: a pandas UDF over the feature columns, one model load per
partition, one struct column expanded into the output columns.

Only the feature columns pass through Python; every other column stays in the JVM untouched. Vector
columns reach the UDF as arrays (``vector_to_array``), as they were prepared for training. An output
that is one value per row becomes a double column, a longer one an array of doubles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd

#: The temporary struct column holding every output.
_OUTPUTS = "__hvd_outputs"


def _as_batch(column: pd.Series, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    values: np.ndarray = column.to_numpy()
    if shape:
        return np.stack([np.asarray(v, dtype=dtype) for v in values]).reshape((len(column), *shape))
    return values.astype(dtype)


def _row_values(output: np.ndarray) -> Any:
    output = np.asarray(output, dtype=np.float64)
    flat = output.reshape(len(output), -1)
    return flat[:, 0] if flat.shape[1] == 1 else list(flat)


def output_is_scalar(output: np.ndarray) -> bool:
    return int(np.prod(np.asarray(output).shape[1:], dtype=np.int64)) == 1


def add_predictions(
    dataset: Any,
    *,
    feature_columns: list[str],
    feature_specs: dict[str, Any],
    output_columns: list[str],
    predictor: Callable[[Any], Callable[[list[np.ndarray]], list[np.ndarray]]],
    payload: Any,
) -> Any:
    from pyspark.ml.functions import vector_to_array
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.functions import pandas_udf
    from pyspark.sql.types import ArrayType, DoubleType, StructField, StructType

    missing = [c for c in feature_columns if c not in dataset.columns]
    if missing:
        raise ValueError(f"transform: the DataFrame lacks feature column(s) {missing}; it has {dataset.columns}")
    specs = [(tuple(feature_specs[c].shape), feature_specs[c].dtype) for c in feature_columns]
    # The output types, from the model's answer to one row of zeros.
    sample = predictor(payload)([np.zeros((1, *shape), dtype=dtype) for shape, dtype in specs])
    if len(sample) != len(output_columns):
        raise ValueError(
            f"transform: the model gives {len(sample)} output(s) for {len(output_columns)} output column(s)"
        )
    schema = StructType(
        [
            StructField(name, DoubleType() if output_is_scalar(out) else ArrayType(DoubleType()))
            for name, out in zip(output_columns, sample, strict=True)
        ]
    )

    def predict(batches: Iterator[tuple[pd.Series, ...]]) -> Iterator[pd.DataFrame]:
        model = predictor(payload)
        for columns in batches:
            columns = (columns,) if isinstance(columns, pd.Series) else columns
            inputs = [_as_batch(c, shape, dtype) for c, (shape, dtype) in zip(columns, specs, strict=True)]
            outputs = model(inputs)
            yield pd.DataFrame({name: _row_values(o) for name, o in zip(output_columns, outputs, strict=True)})

    vectors = {f.name for f in dataset.schema.fields if isinstance(f.dataType, VectorUDT)}
    inputs = [vector_to_array(F.col(c)) if c in vectors else F.col(c) for c in feature_columns]
    udf = pandas_udf(predict, returnType=schema)  # type: ignore[call-overload]
    with_outputs = dataset.withColumn(_OUTPUTS, udf(*inputs))
    return with_outputs.select(
        *[F.col(f"`{c}`") for c in dataset.columns], *[F.col(f"{_OUTPUTS}.`{n}`").alias(n) for n in output_columns]
    )
