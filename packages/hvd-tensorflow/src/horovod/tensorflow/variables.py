"""Variables as Horovod's TensorFlow API meets them: ``tf.Variable`` and Keras 3's variables alike.

Keras 3 models and optimizers hold ``keras.Variable`` objects, which wrap a ``tf.Variable`` on the
TensorFlow backend but have neither ``read_value()`` nor ``ref()`` and are unhashable. Horovod
scripts pass ``model.variables`` and ``opt.variables`` to ``hvd.broadcast_variables`` and layers to
``PartialDistributedGradientTape``, so both kinds must work wherever a variable is taken.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf


def tf_variable(variable: Any) -> tf.Variable:
    """The ``tf.Variable`` that holds ``variable``'s value (itself for a ``tf.Variable``)."""
    if isinstance(variable, tf.Variable):
        return variable
    held = getattr(variable, "value", None)  # keras.Variable on the TensorFlow backend
    if isinstance(held, tf.Variable):
        return held
    raise TypeError(
        f"expected a tf.Variable or a Keras variable on the TensorFlow backend, got {type(variable).__module__}."
        f"{type(variable).__name__}"
    )


def variable_key(variable: Any) -> Any:
    """A hashable key standing for ``variable`` (the same for a Keras variable and its tf.Variable)."""
    return tf_variable(variable).ref()


def is_variable(value: Any) -> bool:
    try:
        tf_variable(value)
    except TypeError:
        return False
    return True
