"""Plugin hooks of hvd-backend-example, loaded through the ``horovod`` entry point.

Kept light on purpose: hvd-core imports this module when it discovers plugins, so it imports
nothing heavy and loads no native code. The library path is computed only when the engine asks.
"""

from __future__ import annotations

from collections.abc import Callable

from horovod.common.plugin_api import BackendSpec, hookimpl


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("hvd-backend-example")
    except metadata.PackageNotFoundError:  # imported from a source tree
        return "0.0.0+unknown"


def _library() -> str:
    from hvd_backend_example import library_path

    return library_path()


@hookimpl
def hvd_register_backends(register: Callable[[BackendSpec], None]) -> None:
    """Registers the "example" CPU backend, ranked below every real CPU backend (priority -10)."""
    register(
        BackendSpec(
            name="example",
            library=_library,
            device_kinds=("cpu",),
            version=_version(),
            priority=-10,
        )
    )
