"""hvd-core's own plugin (entry point ``core``): the in-memory test backend.

The in-memory backend lives inside hvd-core's native extension, so its "library" is that extension
file. It connects engines living in one process only (many ranks in one test process), hence
``in_process_only`` and the lowest priority: never the default for a real job.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from importlib import metadata

from horovod.common.hookspecs import hookimpl
from horovod.common.registry import BackendSpec

_NATIVE_MODULE = "horovod.common._native._core"


def _native_library() -> str:
    """Path of hvd-core's native extension, found without importing it (importing loads the engine)."""
    try:
        spec = importlib.util.find_spec(_NATIVE_MODULE)
    except ImportError:  # a parent package is missing
        spec = None
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        raise RuntimeError(
            f"hvd-core's native extension {_NATIVE_MODULE} was not found (looked along sys.path). "
            "Reinstall hvd-core (pip install --force-reinstall hvd-core), or build it in a source checkout."
        )
    return spec.origin


def _core_version() -> str:
    try:
        return metadata.version("hvd-core")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"


@hookimpl
def hvd_register_backends(register: Callable[[BackendSpec], None]) -> None:
    register(
        BackendSpec(
            name="inmemory",
            library=_native_library,  # a callable: the path is only looked up when the backend is used
            device_kinds=("cpu",),
            version=_core_version(),
            priority=-100,
            in_process_only=True,
        )
    )
