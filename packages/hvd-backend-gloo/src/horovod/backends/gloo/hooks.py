"""Plugin hooks of hvd-backend-gloo, loaded through the ``horovod`` entry point ``gloo``.

Kept light on purpose: hvd-core imports this module when it discovers plugins, so it imports
nothing heavy and loads no native code. The library path is computed only when the engine asks.
"""

from __future__ import annotations

from collections.abc import Callable

from horovod.backends.gloo.version import __version__
from horovod.common.plugin_api import BackendSpec, hookimpl

#: Among CPU backends the highest priority is the default: Gloo is hvd's default CPU backend.
PRIORITY = 100


def _library() -> str:
    """The library's path, asked for by the engine just before it opens the library."""
    from horovod.backends.gloo import library_path, protect_from_global_gloo

    path = library_path()
    protect_from_global_gloo(path)
    return path


@hookimpl
def hvd_register_backends(register: Callable[[BackendSpec], None]) -> None:
    """Registers the "gloo" CPU backend (``--gloo``, ``HOROVOD_CPU_OPERATIONS=gloo``)."""
    register(
        BackendSpec(
            name="gloo",
            library=_library,
            device_kinds=("cpu",),
            version=__version__,
            priority=PRIORITY,
        )
    )
