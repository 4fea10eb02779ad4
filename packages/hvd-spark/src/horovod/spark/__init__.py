"""Horovod on Spark: ``horovod.spark.run`` runs a function as a Horovod job whose ranks are Spark
tasks; ``horovod.spark.torch.TorchEstimator`` and ``horovod.spark.keras.KerasEstimator`` train on a
DataFrame as Spark ML Estimators, keeping data, runs and checkpoints in a ``Store``."""

from __future__ import annotations

from horovod.spark.driver import RankFailed
from horovod.spark.elastic import run_elastic
from horovod.spark.runner import run
from horovod.spark.version import __version__

__all__ = ["RankFailed", "__version__", "run", "run_elastic"]
