"""The NCCL the backend runs on: found here, loaded and checked by the backend library itself.

The backend library does not link ``libnccl.so.2``: it opens it at run time (``csrc/nccl_library.cc``)
from, in order,

1. ``HOROVOD_NCCL_LIBRARY``, a path the user names (and then nothing else);
2. the copy already loaded in the process (torch loads its own): one NCCL shared with the framework;
3. the NVIDIA wheels' folders on ``sys.path``: ``nvidia/nccl/lib`` (``nvidia-nccl-cu13`` and
   ``-cu12``) and ``nvidia/cu13/lib``, found here and handed to the library;
4. ``libnccl.so.2`` by the system's library search.

It must be NCCL 2.7 or later (``ncclGetVersion``); averages inside NCCL need 2.10, other scale
factors 2.11, and older releases leave scaling to the engine. ctypes opens the very file the engine
opens (``dlopen`` of one path gives one handle), so what is loaded here is what the engine's
communicators use.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

#: Where the NVIDIA wheels put libnccl, relative to a ``sys.path`` entry (site-packages).
WHEEL_FOLDERS = (("nvidia", "nccl", "lib"), ("nvidia", "cu13", "lib"), ("nvidia", "cu12", "lib"))
SONAME = "libnccl.so.2"
#: The wheels that carry NCCL, newest CUDA first, for the version reported without loading it.
WHEEL_DISTRIBUTIONS = ("nvidia-nccl-cu13", "nvidia-nccl-cu12")
ENV_LIBRARY = "HOROVOD_NCCL_LIBRARY"

_ERROR_LEN = 4096
_lock = threading.Lock()
_libraries: dict[str, ctypes.CDLL] = {}


def candidates(search_path: Iterable[str] | None = None) -> list[str]:
    """The wheels' ``libnccl.so.2`` files on ``search_path`` (``sys.path``), in its order."""
    found: list[str] = []
    for entry in sys.path if search_path is None else search_path:
        for folder in WHEEL_FOLDERS:
            path = Path(entry or ".", *folder, SONAME)
            if path.is_file() and str(path) not in found:
                found.append(str(path))
    return found


def _backend(path: str) -> ctypes.CDLL:
    with _lock:
        if path not in _libraries:
            lib = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)  # as the engine opens it
            lib.hvd_nccl_load.argtypes = [
                ctypes.c_char_p,
                ctypes.POINTER(ctypes.c_char_p),
                ctypes.c_int32,
                ctypes.c_char_p,
                ctypes.c_size_t,
            ]
            lib.hvd_nccl_load.restype = ctypes.c_int
            lib.hvd_nccl_loaded.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            lib.hvd_nccl_loaded.restype = ctypes.c_int
            _libraries[path] = lib
        return _libraries[path]


def load(backend_path: str, explicit: str | None = None, search: Sequence[str] | None = None) -> tuple[str, str]:
    """Loads (once per process) the NCCL the backend at ``backend_path`` runs on; returns its version
    and where it came from. ``explicit`` defaults to ``HOROVOD_NCCL_LIBRARY``, ``search`` to the
    wheels found on ``sys.path``. OSError saying what was tried and how to install NCCL."""
    lib = _backend(backend_path)
    named = os.environ.get(ENV_LIBRARY, "") if explicit is None else explicit
    places = candidates() if search is None else list(search)
    array = (ctypes.c_char_p * max(1, len(places)))(*[p.encode() for p in places])
    error = ctypes.create_string_buffer(_ERROR_LEN)
    if lib.hvd_nccl_load(named.encode(), array, len(places), error, _ERROR_LEN) != 0:
        raise OSError(error.value.decode(errors="replace"))
    found = loaded(backend_path)
    assert found is not None  # hvd_nccl_load succeeded
    return found


def version_text(code: int) -> str:
    """``"2.30.7"`` for a version code as ncclGetVersion returns it (X*1000+Y*100+Z up to 2.8)."""
    major, rest = divmod(code, 10000) if code >= 10000 else divmod(code, 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def loaded(backend_path: str) -> tuple[str, str] | None:
    """(version, origin) of the NCCL the backend at ``backend_path`` loaded, or None before it did."""
    origin = ctypes.create_string_buffer(1024)
    code = _backend(backend_path).hvd_nccl_loaded(origin, len(origin))
    return (version_text(code), origin.value.decode(errors="replace")) if code else None


def describe() -> str:
    """Which NCCL a job would use, without loading one: for ``hvd.nccl_built(verbose=True)`` and
    ``horovodrun --check-build``. The copy already in the process and its version, else the named
    library, else the wheel's version, else that none was found."""
    named = os.environ.get(ENV_LIBRARY, "")
    if named:
        return f"NCCL from {named} ({ENV_LIBRARY})"
    try:
        present = ctypes.CDLL(SONAME, mode=os.RTLD_NOLOAD | os.RTLD_LOCAL | os.RTLD_NOW)
    except OSError:
        present = None
    if present is not None and hasattr(present, "ncclGetVersion"):
        code = ctypes.c_int(0)
        if present.ncclGetVersion(ctypes.byref(code)) == 0 and code.value > 0:
            return f"NCCL {version_text(code.value)}, already loaded"
    from importlib import metadata

    for distribution in WHEEL_DISTRIBUTIONS:
        try:
            return f"NCCL {metadata.version(distribution)} from {distribution}"
        except metadata.PackageNotFoundError:
            continue
    return f"no NCCL found: pip install {WHEEL_DISTRIBUTIONS[0]}"
