"""``hvd.Compression`` of horovod.keras: the same choices on every Keras backend.

``Compression.none`` and ``Compression.fp16`` name an algorithm; the backend's framework package
does the work with its own compressor of the same name. A framework's own compressor (for example
``horovod.tensorflow.Compression.fp16``, which Horovod's Keras signatures show) is used as it is.
"""

from __future__ import annotations

from typing import Any


class NoneCompressor:
    """No compression."""

    algorithm = "none"


class FP16Compressor:
    """Floating-point gradients travel as float16 and are cast back after the reduction."""

    algorithm = "fp16"


class Compression:
    """The compression algorithms DistributedOptimizer and allreduce accept."""

    none = NoneCompressor
    fp16 = FP16Compressor


def backend_compressor(compression: Any, backend_compression: Any) -> Any:
    """The backend framework's compressor for ``compression`` (its ``Compression`` namespace given)."""
    algorithm = getattr(compression, "algorithm", None)
    if algorithm is None:
        return compression  # the framework's own compressor
    return getattr(backend_compression, algorithm)
