"""hvd-backend-example: a collective backend for hvd, written by a "third party".

The backend is a plain C shared library (``store_backend.c``) implementing hvd-core's versioned C
ABI (``horovod/hvd_backend.h``, ``hvd_backend_v1``). It moves every byte through the key-value
store that the engine passes to it, so it needs no transport of its own: it is a template for
writing backends and a test fixture, not a fast backend.

hvd-core finds it through the ``horovod`` entry point (:mod:`hvd_backend_example.hooks`); select it
with ``HOROVOD_CPU_OPERATIONS=example``. Nothing here imports hvd-core or loads the library.
"""

from __future__ import annotations

import os

__all__ = ["library_path"]

#: File names the CMake target ``hvd_backend_example`` gets on each platform.
_LIBRARY_NAMES = ("libhvd_backend_example.so", "libhvd_backend_example.dylib", "hvd_backend_example.dll")


def library_path() -> str:
    """Absolute path of the backend's shared library, installed next to this module
    (FileNotFoundError saying how to install it)."""
    from horovod.common.plugin_api import find_backend_library

    here = os.path.dirname(os.path.abspath(__file__))
    hint = "install the package (pip install --find-links <wheelhouse> examples/hvd-backend-example)"
    return find_backend_library(here, _LIBRARY_NAMES, "hvd-backend-example", hint)
