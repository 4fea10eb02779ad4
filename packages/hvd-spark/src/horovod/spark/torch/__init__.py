"""``horovod.spark.torch``: the TorchEstimator and TorchModel."""

from horovod.spark.torch.estimator import TorchEstimator, TorchModel

__all__ = ["TorchEstimator", "TorchModel"]
