"""``hvd.load_model``: a saved Keras model, its optimizer distributed again with its state."""

from __future__ import annotations

from typing import Any

import keras

from horovod._keras.compression import Compression
from horovod._keras.optimizer import _Distributed, attach, gradient_settings
from horovod.common.framework_api import Average, global_process_set


def load_model(
    filepath: Any,
    custom_optimizers: list[type] | None = None,
    custom_objects: dict[str, Any] | None = None,
    compression: Any = Compression.none,
) -> Any:
    """Loads a model saved by ``model.save`` (``.keras``, or ``.h5``) with its compiled optimizer
    wrapped in a DistributedOptimizer, its state (iterations, slots) as saved.

    Keras's own optimizers load by themselves; an optimizer class of your own must be listed in
    ``custom_optimizers`` (or ``custom_objects``, which also serves layers, losses and metrics).

    :param filepath: the saved model: a path (``.keras`` or ``.h5``), as ``keras.models.load_model`` takes it.
    :param custom_optimizers: optimizer classes of your own that the model may have been compiled with.
    :param custom_objects: a dict of names to custom objects (layers, losses, metrics, optimizers), as
        ``keras.models.load_model`` takes it.
    :param compression: how the loaded optimizer compresses gradients for the allreduce (default ``Compression.none``).
    """
    objects = dict(custom_objects or {})
    for cls in custom_optimizers or []:
        if not (isinstance(cls, type) and issubclass(cls, keras.optimizers.Optimizer)):
            raise TypeError(f"custom_optimizers lists Keras 3 optimizer classes, got {cls!r}")
        objects[cls.__name__] = cls
    try:
        model = keras.saving.load_model(filepath, custom_objects=objects, compile=True)
    except TypeError as error:
        if "Could not locate class" in str(error) or "Could not deserialize" in str(error):
            raise ValueError(
                f"hvd.load_model({filepath!r}): {error}\nAn optimizer (or layer) class of your own must be given: "
                "hvd.load_model(path, custom_optimizers=[MyOptimizer]) or custom_objects={'Name': Class}"
            ) from error
        raise
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and not isinstance(optimizer, _Distributed):
        prefix = f"Distributed{type(optimizer).__name__}"
        settings = gradient_settings(prefix, compression, False, 1.0, Average, 0, None, global_process_set)
        attach(optimizer, settings, 1, False)
    return model
