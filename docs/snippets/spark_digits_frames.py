# ruff: noqa: F821 (spark is the session the page's first block creates: this file runs beside its block)
# Prelude of docs/spark.md's Estimator example: train_df and test_df, as the page leaves them to
# the reader (scikit-learn's digits as Spark ML vectors).
import shutil

from pyspark.ml.linalg import Vectors
from sklearn.datasets import load_digits

digits = load_digits()
rows = [(Vectors.dense((digits.data[i] / 16.0).tolist()), int(digits.target[i])) for i in range(len(digits.target))]
train_df = spark.createDataFrame(rows[:1400], ["features", "label"])
test_df = spark.createDataFrame(rows[1400:], ["features", "label"])

# The page names fixed paths: what an earlier run of it left there goes first (fitted.save would
# refuse an existing model directory).
for leftover in ("/tmp/hvd-store", "/tmp/digits-model"):
    shutil.rmtree(leftover, ignore_errors=True)
