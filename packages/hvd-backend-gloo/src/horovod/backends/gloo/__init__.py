"""hvd-backend-gloo: CPU collectives for hvd on Facebook Gloo.

The backend is a plain C++ shared library (``libhvd_backend_gloo.so``, built from ``csrc/``) that
implements hvd-core's versioned C ABI (``horovod/hvd_backend.h``, ``hvd_backend_v1``) on Gloo's TCP
transport, and through shared memory between ranks on one host. hvd-core's engine opens it with
``dlopen(RTLD_LOCAL)`` when the backend is chosen; it exports only ``hvd_backend_v1_get``,
``hvd_backend_ext_v1_get`` (the ABI's optional extensions) and ``hvd_gloo_transport``, so the Gloo
it links never meets the Gloo bundled in torch.

hvd-core finds it through the ``horovod`` entry point (:mod:`horovod.backends.gloo.hooks`). It is
the default CPU backend (priority 100); ask for it explicitly with ``horovodrun --gloo`` or
``HOROVOD_CPU_OPERATIONS=gloo``. Knobs: ``HOROVOD_GLOO_TIMEOUT_SECONDS`` (connection set-up and
each collective, default 30) and ``HOROVOD_GLOO_IFACE`` (network interface to bind).

Importing this package loads no native code.
"""

from __future__ import annotations

import os
import sys

from horovod.backends.gloo.version import __version__

__all__ = ["__version__", "library_path", "protect_from_global_gloo"]

#: The CMake target ``hvd_backend_gloo`` is installed into this subdirectory, which holds no Python
#: source (an editable install turns the directory holding a native file into a namespace package).
_NATIVE_DIR = "_native"
_LIBRARY_NAMES = ("libhvd_backend_gloo.so", "libhvd_backend_gloo.dylib")


def library_path() -> str:
    """Absolute path of the backend's shared library (FileNotFoundError saying how to install it)."""
    from horovod.common.plugin_api import find_backend_library

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), _NATIVE_DIR)
    hint = "install the package (pip install hvd-backend-gloo, which needs Gloo: apt-get install libgloo-dev)"
    return find_backend_library(here, _LIBRARY_NAMES, "hvd-backend-gloo", hint)


# A symbol every build of Gloo defines (gloo::Context::getTimeout() const).
_GLOO_PROBE_SYMBOL = "_ZNK4gloo7Context10getTimeoutEv"


def protect_from_global_gloo(path: str) -> None:
    """Loads the library with RTLD_DEEPBIND if another Gloo's symbols are already global.

    hvd-core opens backends RTLD_LOCAL, so this library never leaks Gloo's symbols. The reverse
    can happen: ``TORCH_USE_RTLD_GLOBAL=1`` makes torch's bundled Gloo global, and the dynamic
    linker would then bind this library's (and Debian libgloo's) references to torch's Gloo, a
    different version (measured: a segmentation fault). Loading the library first with
    RTLD_DEEPBIND makes it and its libgloo prefer their own symbols; hvd-core's later dlopen then
    finds it loaded. Without a global Gloo, nothing is done.
    """
    import ctypes

    if sys.platform != "linux" or not hasattr(os, "RTLD_DEEPBIND"):
        return
    if not hasattr(ctypes.CDLL(None), _GLOO_PROBE_SYMBOL):
        return
    ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW | os.RTLD_DEEPBIND)
