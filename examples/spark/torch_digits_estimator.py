"""A TorchEstimator trained on a Spark DataFrame of scikit-learn's digits, with horovod.spark.

The DataFrame goes to the Store as Parquet once; each of the ``--num-proc`` Horovod ranks (Spark
tasks) streams its shard of it and trains with hvd.DistributedOptimizer; the fitted TorchModel then
adds a prediction column to the test DataFrame.

    python examples/spark/torch_digits_estimator.py                      # local[2], 2 ranks
    python examples/spark/torch_digits_estimator.py --master "local-cluster[2,1,1024]"
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np
import torch
from pyspark.ml.linalg import Vectors
from pyspark.sql import SparkSession
from sklearn.datasets import load_digits

from horovod.spark.common.store import Store
from horovod.spark.torch import TorchEstimator


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.layers(features)


def digits_frames(spark: SparkSession) -> tuple:
    """(train, test): ``features`` a vector of 64 pixels in [0, 1], ``label`` the digit."""
    digits = load_digits()
    rows = [(Vectors.dense((x / 16.0).tolist()), int(y)) for x, y in zip(digits.data, digits.target, strict=True)]
    df = spark.createDataFrame(rows, ["features", "label"])
    return df.randomSplit([0.8, 0.2], seed=42)


def main() -> None:
    parser = argparse.ArgumentParser(description="horovod.spark TorchEstimator on scikit-learn's digits")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--num-proc", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--store", default=None, help="the Store's prefix path (default: a temporary directory)")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(args.master)
        .appName("hvd-spark-torch-digits")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    train, test = digits_frames(spark)
    torch.manual_seed(0)
    model = Net()
    estimator = TorchEstimator(
        num_proc=args.num_proc,
        store=Store.create(args.store or tempfile.mkdtemp(prefix="hvd-spark-store-")),
        model=model,
        optimizer=torch.optim.Adam(model.parameters(), lr=0.005),
        loss=torch.nn.CrossEntropyLoss(),
        feature_cols=["features"],
        label_cols=["label"],
        validation=0.1,
        batch_size=32,
        epochs=args.epochs,
        verbose=1,
    )
    fitted = estimator.fit(train)
    last = fitted.getHistory()[-1]
    print(f"last epoch: loss {last['loss']:.4f}, validation loss {last['val_loss']:.4f}")
    rows = fitted.transform(test).select("label", "label__output").collect()
    accuracy = float(np.mean([int(np.argmax(r["label__output"])) == r["label"] for r in rows]))
    print(f"test accuracy: {accuracy:.4f} on {len(rows)} rows")
    spark.stop()


if __name__ == "__main__":
    main()
