"""hvd-torch's plugin (entry point ``torch``): registers the PyTorch framework binding.

Light on purpose: hvd-core loads every plugin's hooks module when it first needs plugins, so this
module imports neither torch nor the rest of horovod.torch.
"""

from __future__ import annotations

from collections.abc import Callable

from horovod.common.plugin_api import FrameworkSpec, hookimpl
from horovod.torch.version import __version__


@hookimpl
def hvd_register_frameworks(register: Callable[[FrameworkSpec], None]) -> None:
    register(FrameworkSpec(name="torch", module="horovod.torch", version=__version__))
