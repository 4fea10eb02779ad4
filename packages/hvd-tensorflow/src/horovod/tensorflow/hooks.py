"""hvd-tensorflow's plugin (entry point ``tensorflow``): registers the TensorFlow framework binding.

Light on purpose: hvd-core loads every plugin's hooks module when it first needs plugins, so this
module imports neither TensorFlow nor the rest of horovod.tensorflow.
"""

from __future__ import annotations

from collections.abc import Callable

from horovod.common.plugin_api import FrameworkSpec, hookimpl
from horovod.tensorflow.version import __version__


@hookimpl
def hvd_register_frameworks(register: Callable[[FrameworkSpec], None]) -> None:
    register(FrameworkSpec(name="tensorflow", module="horovod.tensorflow", version=__version__))
