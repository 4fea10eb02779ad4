"""horovod.keras: Horovod's Keras API on Keras 3 (``import horovod.keras as hvd``).

Thin on purpose: everything is horovod._keras's, which horovod.keras and horovod.tensorflow.keras share.
Attributes load on first use.
"""

from __future__ import annotations

from horovod._keras import EXPORTS, SUBMODULES, __version__
from horovod.common.plugin_api import lazy_exports

__getattr__, __dir__, _names = lazy_exports(
    "horovod.keras",
    globals(),
    EXPORTS,
    SUBMODULES,
    framework="keras",
    install_hint="pip install keras (3.x), or tensorflow",
)
__all__ = ["__version__", *_names]
