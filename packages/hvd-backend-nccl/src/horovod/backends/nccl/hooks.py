"""Plugin hooks of hvd-backend-nccl, loaded through the ``horovod`` entry point ``nccl``.

Kept light on purpose: hvd-core imports this module when it discovers plugins, so it imports
nothing heavy and loads no native code: NCCL is loaded when the engine asks for the library.
"""

from __future__ import annotations

from collections.abc import Callable

from horovod.backends.nccl.version import __version__
from horovod.common.plugin_api import BackendSpec, hookimpl

#: The only backend for CUDA tensors hvd ships; the highest priority makes it their default.
PRIORITY = 100


def _library() -> str:
    """The library's path, asked for by the engine just before it opens the library (NCCL loaded)."""
    from horovod.backends.nccl import library_path

    return library_path()


@hookimpl
def hvd_register_backends(register: Callable[[BackendSpec], None]) -> None:
    """Registers the "nccl" backend for CUDA tensors (``HOROVOD_GPU_OPERATIONS=NCCL``). Its version
    names the NCCL a job would load (``hvd.nccl_built(verbose=True)``)."""
    from horovod.backends.nccl.nccl_library import describe

    register(
        BackendSpec(
            name="nccl",
            library=_library,
            device_kinds=("cuda",),
            version=f"{__version__} ({describe()})",
            priority=PRIORITY,
        )
    )
