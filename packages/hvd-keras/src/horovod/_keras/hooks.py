"""hvd-keras's plugin (entry point ``keras``): registers the Keras framework binding.

Light on purpose: hvd-core loads every plugin's hooks module when it first needs plugins, so this
module imports neither Keras nor the rest of horovod._keras.
"""

from __future__ import annotations

from collections.abc import Callable

from horovod._keras.version import __version__
from horovod.common.plugin_api import FrameworkSpec, hookimpl


@hookimpl
def hvd_register_frameworks(register: Callable[[FrameworkSpec], None]) -> None:
    register(FrameworkSpec(name="keras", module="horovod.keras", version=__version__))
