"""hvd-mxnet's plugin (entry point ``mxnet``): registers the MXNet framework binding.

Light on purpose: hvd-core loads every plugin's hooks module when it first needs plugins, so this
module imports neither MXNet nor the rest of horovod.mxnet.
"""

from __future__ import annotations

from collections.abc import Callable

from horovod.common.plugin_api import FrameworkSpec, hookimpl
from horovod.mxnet.version import __version__


@hookimpl
def hvd_register_frameworks(register: Callable[[FrameworkSpec], None]) -> None:
    register(FrameworkSpec(name="mxnet", module="horovod.mxnet", version=__version__))
