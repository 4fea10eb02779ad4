"""``horovod.spark.torch``: the TorchEstimator and TorchModel.

They are loaded when first used: the ranks import only ``horovod.spark.torch.remote`` (the training
function), which must not pull pyspark's ML modules into every rank's start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from horovod.common.plugin_api import lazy_exports

if TYPE_CHECKING:
    from horovod.spark.torch.estimator import TorchEstimator as TorchEstimator
    from horovod.spark.torch.estimator import TorchModel as TorchModel

__getattr__, __dir__, __all__ = lazy_exports(
    "horovod.spark.torch",
    globals(),
    {"estimator": "TorchEstimator TorchModel"},
    ("estimator", "losses", "remote"),
    framework="pyspark",
    install_hint="pip install pyspark",
)
