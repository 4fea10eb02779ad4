"""Horovod's Keras callbacks (horovod._keras.callbacks)."""

from horovod._keras.callbacks import (
    BestModelCheckpoint,
    BroadcastGlobalVariablesCallback,
    LearningRateScheduleCallback,
    LearningRateWarmupCallback,
    MetricAverageCallback,
)

__all__ = [
    "BestModelCheckpoint",
    "BroadcastGlobalVariablesCallback",
    "LearningRateScheduleCallback",
    "LearningRateWarmupCallback",
    "MetricAverageCallback",
]
