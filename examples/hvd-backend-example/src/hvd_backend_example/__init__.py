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
import sys

__all__ = ["library_path"]

#: File names the CMake target ``hvd_backend_example`` gets on each platform.
_LIBRARY_NAMES = ("libhvd_backend_example.so", "libhvd_backend_example.dylib", "hvd_backend_example.dll")


def library_path() -> str:
    """Absolute path of the backend's shared library, installed next to this module.

    Raises:
        FileNotFoundError: the library is not there (the package was not built with CMake, e.g.
            it was imported from a source checkout instead of an installed wheel).
    """
    here = os.path.dirname(os.path.abspath(__file__))
    for name in _LIBRARY_NAMES:
        candidate = os.path.join(here, name)
        if os.path.isfile(candidate):
            return candidate
    found = _find_in_distribution()
    if found is not None:
        return found
    raise FileNotFoundError(
        f"hvd-backend-example: the backend library ({' or '.join(_LIBRARY_NAMES)}) is missing "
        f"from {here}; install the package (pip install --find-links <wheelhouse> "
        f"examples/hvd-backend-example) rather than importing it from a source tree "
        f"(Python: {sys.executable})"
    )


def _find_in_distribution() -> str | None:
    """Where an editable install put the library: its RECORD knows, the package directory may not."""
    from importlib import metadata

    try:
        files = metadata.distribution("hvd-backend-example").files or ()
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name in _LIBRARY_NAMES:
            path = os.path.abspath(str(f.locate()))
            if os.path.isfile(path):
                return path
    return None
