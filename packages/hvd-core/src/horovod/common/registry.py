"""What plugins register: descriptions of backends and frameworks.

These are plain data, so that a plugin's ``hooks.py`` can build them without importing anything
heavy (no native code is loaded until the engine asks for a backend).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Protocol, runtime_checkable

#: A library path, or a callable that returns one (so the path is only computed when needed).
LibraryLocator = str | Callable[[], str]


@dataclasses.dataclass(frozen=True)
class BackendSpec:
    """A collective backend: a shared library exporting ``hvd_backend_v1_get``.

    :param name: the short name users select it by (``HOROVOD_CPU_OPERATIONS=<name>``,
        ``--gloo``...); unique among the installed plugins' backends.
    :param library: the path of the shared library implementing the C ABI, or a callable returning
        it (called only when the engine loads the backend, e.g. one that calls
        :func:`~horovod.common.plugin_api.find_backend_library`).
    :param device_kinds: the device kinds it serves: ``"cpu"``, ``"cuda"``.
    :param version: the backend package's version, shown by ``horovodrun --check-build``; empty
        when unknown.
    :param priority: among the backends serving a device kind, the one with the highest priority is
        the default (ties go to the first name in alphabetical order).
    :param in_process_only: True for a backend whose ranks must all live in one process (the
        in-memory test backend): it is never chosen as a default unless asked for, and
        ``horovodrun --check-build`` does not list it.
    :param threads_supported_by: whether other code may call the backend's communication library
        from its own threads while the engine runs (``MPI_THREAD_MULTIPLE`` for MPI), as
        ``hvd.mpi_threads_supported()`` reports it: a bool, or a callable asked only then (it may
        need the library loaded).

    .. versionadded:: 0.1
    """

    #: Short name users select it by (``HOROVOD_CPU_OPERATIONS=<name>``, ``--gloo``...).
    name: str
    #: Path of the shared library implementing the C ABI, or a callable returning it.
    library: LibraryLocator
    #: Device kinds it serves: ``"cpu"``, ``"cuda"``.
    device_kinds: tuple[str, ...] = ("cpu",)
    #: The backend package's version, shown by ``horovodrun --check-build``.
    version: str = ""
    #: Among backends serving the same device kind, the highest priority is the default.
    priority: int = 0
    #: True for backends whose ranks must all live in one process (the in-memory test backend).
    in_process_only: bool = False
    #: Whether other code may call the backend's communication library from its own threads while
    #: the engine runs (MPI_THREAD_MULTIPLE for MPI): ``hvd.mpi_threads_supported()`` asks the
    #: running backend. A bool, or a callable asked only then (it may need the library loaded).
    #:
    #: .. versionadded:: 0.2
    threads_supported_by: bool | Callable[[], bool] = False

    def library_path(self) -> str:
        return self.library() if callable(self.library) else self.library

    def threads_supported(self) -> bool:
        """The answer of :attr:`threads_supported_by`."""
        answer = self.threads_supported_by
        return bool(answer() if callable(answer) else answer)


@dataclasses.dataclass(frozen=True)
class FrameworkSpec:
    """A framework binding such as ``horovod.torch``.

    :param name: the short name: ``"torch"``, ``"tensorflow"``, ``"keras"``, ``"mxnet"``; unique
        among the installed plugins' frameworks.
    :param module: the module users import, e.g. ``"horovod.torch"``.
    :param version: the binding package's version, shown by
        ``horovod.common.util.extension_available(name, verbose=True)``; empty when unknown.

    .. versionadded:: 0.1
    """

    #: Short name: ``"torch"``, ``"tensorflow"``, ``"keras"``, ``"mxnet"``.
    name: str
    #: The module users import, e.g. ``"horovod.torch"``.
    module: str
    version: str = ""


@runtime_checkable
class RendezvousStore(Protocol):
    """What a launcher plugin hands the engine (``hvd_rendezvous_store``) to connect a job.

    .. versionadded:: 0.1
    """

    def set(self, key: str, value: bytes) -> None:
        """Stores ``value`` under ``key`` (replacing any previous value).

        :param key: the key, a string whose prefix is unique to the job (and world) being connected.
        :param value: the bytes to store.
        """

    def get(self, key: str, timeout: float) -> bytes | None:
        """The value of ``key``, waiting up to ``timeout`` seconds for it to appear; None on timeout.

        :param key: the key, as given to :meth:`~horovod.common.plugin_api.RendezvousStore.set` (by
            this process or another of the job).
        :param timeout: how long to wait for the key to be set, in seconds.
        """
