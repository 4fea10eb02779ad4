"""hvd's failures as TensorFlow users catch them.

Horovod's TensorFlow ops raise ``tf.errors.FailedPreconditionError`` when ranks disagree about a
collective (its shape, dtype, op...), eagerly as from a graph; hvd's graph kernels do too (the
TensorFlow status they fail with), and eagerly hvd raises :class:`CollectiveMismatchError`, which
is both that and hvd-core's ``CollectiveMismatchError``: an ``except`` written for either works.
"""

from __future__ import annotations

import tensorflow as tf

from horovod.common import exceptions


class CollectiveMismatchError(exceptions.CollectiveMismatchError, tf.errors.FailedPreconditionError):  # type: ignore[misc]  # (TensorFlow is untyped)
    """Ranks disagreed about a collective: hvd-core's error, and TensorFlow's FailedPreconditionError.

    :param message: what the ranks disagreed about (hvd's message: the tensor, and each rank's).
    """

    def __init__(self, message: str) -> None:
        tf.errors.FailedPreconditionError.__init__(self, None, None, message)
