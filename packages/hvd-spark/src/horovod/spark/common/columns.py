"""The columns an Estimator trains on: which Spark types it takes, and what each becomes per row.

:class:`ColumnSpec` (a column's numpy dtype and per-row shape) travels to the ranks, which must not
need Spark: pyspark is imported inside the functions that inspect a DataFrame, never at import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType, StructField

SUPPORTED_TYPES = (
    "numeric types (byte, short, int, long, float, double, decimal), boolean, arrays of those "
    "(not nested), and Spark ML vectors (pyspark.ml.linalg.VectorUDT, dense or sparse)"
)

SCALAR, ARRAY, VECTOR = "scalar", "array", "vector"


@dataclass(frozen=True)
class ColumnSpec:
    """A column as the model sees it: numpy ``dtype`` name and per-row ``shape`` (``()`` for scalars)."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ColumnSpec:
        return cls(data["name"], data["dtype"], tuple(data["shape"]))


@dataclass(frozen=True)
class InputColumn:
    """A DataFrame column the Estimator reads: its role (for messages), its kind, and its numpy dtype
    once converted (decimals become float64, vectors ``vector_dtype``)."""

    name: str
    role: str  # "feature", "label" or "sample weight"
    kind: str  # SCALAR, ARRAY or VECTOR
    dtype: str
    is_decimal: bool = False  # decimal scalars or elements: cast to double before writing


def as_names(cols: str | Sequence[str] | None) -> list[str]:
    """A list of column names; a lone string is one name, not a sequence of letters."""
    if cols is None:
        return []
    return [cols] if isinstance(cols, str) else list(cols)


def _scalar_dtype(data_type: DataType) -> tuple[str, bool] | None:
    """The numpy dtype of a numeric or boolean Spark type, and whether it is a decimal; else None."""
    from pyspark.sql import types as T

    numpy_names: dict[type, str] = {
        T.ByteType: "int8",
        T.ShortType: "int16",
        T.IntegerType: "int32",
        T.LongType: "int64",
        T.FloatType: "float32",
        T.DoubleType: "float64",
        T.BooleanType: "bool",
    }
    if isinstance(data_type, T.DecimalType):
        return "float64", True
    name = numpy_names.get(type(data_type))
    return None if name is None else (name, False)


def input_column(field: StructField, role: str, vector_dtype: str) -> InputColumn:
    """What ``field`` becomes, or a ValueError naming it, its type and the types supported."""
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import types as T

    data_type = field.dataType
    if isinstance(data_type, VectorUDT):
        return InputColumn(field.name, role, VECTOR, vector_dtype)
    scalar = _scalar_dtype(data_type)
    if scalar is not None:
        return InputColumn(field.name, role, SCALAR, scalar[0], scalar[1])
    if isinstance(data_type, T.ArrayType):
        element = _scalar_dtype(data_type.elementType)
        if element is not None:
            return InputColumn(field.name, role, ARRAY, element[0], element[1])
    raise ValueError(
        f"{role} column {field.name!r} has type {data_type.simpleString()}, which the models cannot take; "
        f"supported: {SUPPORTED_TYPES}"
    )


def _field(df: DataFrame, name: str, role: str) -> StructField:
    fields = {field.name: field for field in df.schema.fields}
    if name not in fields:
        raise ValueError(f"{role} column {name!r} is not in the DataFrame; its columns are: {', '.join(fields)}")
    return fields[name]


def input_columns(
    df: DataFrame,
    feature_cols: str | Sequence[str],
    label_cols: str | Sequence[str],
    sample_weight_col: str | None = None,
    vector_dtype: str = "float64",
) -> list[InputColumn]:
    """The distinct columns to read, each checked (a column in two roles is read once)."""
    features, labels = as_names(feature_cols), as_names(label_cols)
    if not features:
        raise ValueError("feature_cols is empty: name at least one feature column")
    if not labels:
        raise ValueError("label_cols is empty: name at least one label column")
    if vector_dtype not in ("float64", "float32"):
        raise ValueError(f"vector_dtype must be 'float64' or 'float32', not {vector_dtype!r}")
    roles = [(name, "feature") for name in features] + [(name, "label") for name in labels]
    if sample_weight_col is not None:
        roles.append((sample_weight_col, "sample weight"))
    found: dict[str, InputColumn] = {}
    for name, role in roles:
        column = input_column(_field(df, name, role), role, vector_dtype)
        found.setdefault(name, column)
    if sample_weight_col is not None:
        weight = found[sample_weight_col]
        if weight.kind != SCALAR or weight.dtype == "bool":
            raise ValueError(
                f"sample weight column {sample_weight_col!r} must hold one number per row, not {weight.kind} "
                f"of {weight.dtype}"
            )
    return list(found.values())


def check_validation(df: DataFrame, validation: float | str | None, used: Sequence[str]) -> None:
    """``validation`` is None, a fraction in (0, 1), or a boolean or numeric column that is not also
    a feature, label or weight (rows where it is true or non-zero are the validation set)."""
    if validation is None:
        return
    if isinstance(validation, str):
        field = _field(df, validation, "validation")
        scalar = _scalar_dtype(field.dataType)
        if scalar is None:
            raise ValueError(
                f"validation column {validation!r} has type {field.dataType.simpleString()}; it must be boolean or "
                "numeric (rows where it is true or non-zero go to the validation set)"
            )
        if validation in used:
            raise ValueError(f"validation column {validation!r} is also a feature, label or sample weight column")
        return
    if isinstance(validation, bool) or not isinstance(validation, (int, float)):
        raise ValueError(
            f"validation must be a fraction in (0, 1) or a column name, not {type(validation).__name__} {validation!r}"
        )
    if not 0.0 < validation < 1.0:
        raise ValueError(f"validation fraction {validation!r} is not in (0, 1)")


def check_columns(
    df: DataFrame,
    feature_cols: str | Sequence[str],
    label_cols: str | Sequence[str],
    sample_weight_col: str | None = None,
    validation: float | str | None = None,
) -> None:
    """Refuse, before any Spark job runs, columns the Estimator cannot train on: a ValueError names
    the column and what is wrong (missing, unsupported type, bad validation column or fraction)."""
    used = [column.name for column in input_columns(df, feature_cols, label_cols, sample_weight_col)]
    check_validation(df, validation, used)
