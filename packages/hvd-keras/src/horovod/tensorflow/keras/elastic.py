"""Horovod's elastic Keras API (horovod.tensorflow.keras.elastic): KerasState, the callbacks, run; implemented once in
``horovod._keras.elastic``."""

from horovod._keras import elastic as _implementation
from horovod._keras.elastic import *  # noqa: F403 - the one implementation, re-exported whole

__all__ = _implementation.__all__
