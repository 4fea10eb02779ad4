"""hvd-backend-nccl: GPU collectives for hvd on NVIDIA NCCL.

The backend is a plain C++ shared library (``libhvd_backend_nccl.so``, built from ``csrc/``) that
implements hvd-core's versioned C ABI (``horovod/hvd_backend.h``) for CUDA tensors: every
collective is queued on the engine's stream through the engine's device table
(``horovod/hvd_device.h``). It is built without CUDA or NCCL: ``libnccl.so.2`` is loaded at run time
(:mod:`horovod.backends.nccl.nccl_library`: the copy already in the process, such as torch's, else
the ``nvidia-nccl-cu13`` or ``-cu12`` wheel's, else the system's; ``HOROVOD_NCCL_LIBRARY`` names
one), and its version is checked then.

hvd-core finds it through the ``horovod`` entry point (:mod:`horovod.backends.nccl.hooks`): the
default backend for CUDA tensors, or asked for with ``HOROVOD_GPU_OPERATIONS=NCCL``.

Importing this package loads no native code.
"""

from __future__ import annotations

import os

from horovod.backends.nccl.version import __version__

__all__ = ["__version__", "library_path"]

#: The CMake target ``hvd_backend_nccl`` is installed into this subdirectory, which holds no Python
#: source (an editable install turns the directory holding a native file into a namespace package).
_NATIVE_DIR = "_native"
_LIBRARY_NAMES = ("libhvd_backend_nccl.so",)


def backend_library() -> str:
    """Absolute path of the backend's shared library, without loading anything (FileNotFoundError
    saying how to install the package)."""
    from horovod.common.plugin_api import find_backend_library

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), _NATIVE_DIR)
    hint = "install the package (pip install hvd-backend-nccl nvidia-nccl-cu13)"
    return find_backend_library(here, _LIBRARY_NAMES, "hvd-backend-nccl", hint)


def library_path() -> str:
    """The backend's library, once the NCCL it runs on is loaded and checked: what the engine opens.
    An OSError names the NCCL missing (or too old) and how to install one."""
    from horovod.backends.nccl import nccl_library

    path = backend_library()
    nccl_library.load(path)
    return path
