"""scikit-learn's digits as Spark DataFrames, for the Estimator tests."""

from __future__ import annotations

from typing import Any


def digits_frames(spark: Any, test_fraction: float = 0.25) -> tuple[Any, Any]:
    """(train, test) DataFrames: ``features`` a DenseVector of 64 pixels in [0, 1], ``label`` an int."""
    import numpy as np
    from pyspark.ml.linalg import Vectors
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.default_rng(7).permutation(len(digits.target))  # the file is sorted by writer, roughly
    rows = [(Vectors.dense((digits.data[i] / 16.0).tolist()), int(digits.target[i])) for i in order]
    cut = int(len(rows) * (1 - test_fraction))
    train = spark.createDataFrame(rows[:cut], ["features", "label"])
    test = spark.createDataFrame(rows[cut:], ["features", "label"])
    return train, test


def accuracy(predictions: Any, output_col: str = "label__output") -> float:
    import numpy as np

    rows = predictions.select("label", output_col).collect()
    guesses = np.array([int(np.argmax(r[output_col])) for r in rows])
    labels = np.array([r["label"] for r in rows])
    return float((guesses == labels).mean())
