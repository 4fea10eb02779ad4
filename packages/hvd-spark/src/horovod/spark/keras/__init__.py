"""``horovod.spark.keras``: the KerasEstimator and KerasModel (Keras 3)."""

from horovod.spark.keras.estimator import KerasEstimator, KerasModel

__all__ = ["KerasEstimator", "KerasModel"]
