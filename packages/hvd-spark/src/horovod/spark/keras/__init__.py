"""``horovod.spark.keras``: the KerasEstimator and KerasModel (Keras 3).

They are loaded when first used: the ranks import only ``horovod.spark.keras.remote`` (the training
function), which must not pull pyspark's ML modules into every rank's start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from horovod.common.plugin_api import lazy_exports

if TYPE_CHECKING:
    from horovod.spark.keras.estimator import KerasEstimator as KerasEstimator
    from horovod.spark.keras.estimator import KerasModel as KerasModel

__getattr__, __dir__, __all__ = lazy_exports(
    "horovod.spark.keras",
    globals(),
    {"estimator": "KerasEstimator KerasModel"},
    ("estimator", "remote"),
    framework="pyspark",
    install_hint="pip install pyspark",
)
