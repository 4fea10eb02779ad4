"""The questions about the running job (rank, size, ...) and about what is built and enabled.

``init`` and ``shutdown`` are defined in :mod:`horovod.common.lifecycle` and importable from here as
in earlier releases.
"""

from __future__ import annotations

import os
from typing import Any

from horovod.common import state, util
from horovod.common.lifecycle import init, shutdown
from horovod.common.plugins import get_plugin_manager
from horovod.common.state import is_initialized

__all__ = [
    "HorovodBasics",
    "autotune_state",
    "ccl_built",
    "cross_rank",
    "cross_size",
    "cuda_built",
    "ddl_built",
    "gloo_built",
    "gloo_enabled",
    "init",
    "is_homogeneous",
    "is_initialized",
    "local_rank",
    "local_size",
    "mpi_built",
    "mpi_enabled",
    "mpi_threads_supported",
    "nccl_built",
    "rank",
    "rocm_built",
    "shutdown",
    "size",
    "start_timeline",
    "stop_timeline",
]


def size() -> int:
    return state.topology().size


def rank() -> int:
    return state.topology().rank


def local_size() -> int:
    return state.topology().local_size


def local_rank() -> int:
    return state.topology().local_rank


def cross_size() -> int:
    return state.topology().cross_size


def cross_rank() -> int:
    return state.topology().cross_rank


def is_homogeneous() -> bool:
    """True when every host runs the same number of ranks."""
    t = state.topology()
    return t.local_size * t.cross_size == t.size


def start_timeline(file_path: str, mark_cycles: bool = False) -> None:
    """Starts writing a Chrome-trace timeline (rank 0 writes it; other ranks do nothing, unless
    ``HOROVOD_TIMELINE_ALL_RANKS=1``: then each rank writes ``<file_path>.rank<N>``, and every rank
    must call this, as the ranks then measure their clocks' offsets: :mod:`horovod.common.timelines`).

    :param file_path: the file the timeline (a Chrome trace, ``chrome://tracing``) is written to.
    :param mark_cycles: also mark each cycle of the engine's background loop in the timeline.
    """
    state.context().engine.start_timeline(str(file_path), mark_cycles)
    if os.environ.get("HOROVOD_TIMELINE_ALL_RANKS", "").strip().lower() in ("1", "true", "yes", "on"):
        from horovod.common import timelines  # every rank writes its own: the clocks are measured now

        timelines.note_clock(f"{file_path}.rank{rank()}")


def stop_timeline() -> None:
    state.context().engine.stop_timeline()


def autotune_state() -> dict[str, Any]:
    """The engine's tunable settings in force on this rank, and the cycle they took effect in
    (``settings``: fusion_threshold in bytes, cycle_time_us, the hierarchical switches, the
    tuner's ``epoch`` numbering them, 0 for those the job started with); on rank 0 of a job run
    with ``HOROVOD_AUTOTUNE=1``, also the search (``search``: its phase, the settings tried with
    their scores in bytes per microsecond, the best so far). See docs/guides/autotune.md.
    """
    ctx = state.context()
    tuner = getattr(ctx, "tuner", None)
    return {
        "settings": dict(ctx.engine.current_settings()),
        "search": tuner.search.state() if tuner is not None else None,
    }


# What is built: answered from the registered plugins (horovod.common.util says why, with verbose=True).
def mpi_built() -> bool:
    return util.mpi_built()


def gloo_built() -> bool:
    return util.gloo_built()


def nccl_built() -> bool:
    return util.nccl_built()


def cuda_built() -> bool:
    return util.cuda_built()


def ddl_built() -> bool:
    return util.ddl_built()


def ccl_built() -> bool:
    return util.ccl_built()


def rocm_built() -> bool:
    return util.rocm_built()


# What is enabled: answered from the running engine.
def mpi_enabled() -> bool:
    return state.running_backend() == "mpi"


def gloo_enabled() -> bool:
    return state.running_backend() == "gloo"


def mpi_threads_supported() -> bool:
    """Whether MPI runs with MPI_THREAD_MULTIPLE, so that other MPI code (mpi4py) may call MPI
    while Horovod does; False when MPI is not the backend."""
    backend = state.context().backend_name  # raises before init(), as Horovod does
    if backend != "mpi":
        return False
    # The backend's own package answers through its spec: hvd-core names no backend package.
    return get_plugin_manager().backend(backend).threads_supported()


class HorovodBasics:
    """Horovod's class holding the basic API as methods (``init``, ``size``, ``rank``...).

    Horovod made one per framework from that framework's compiled extension; hvd has one engine for
    every framework, so each method is this module's function of the same name. The constructor's
    arguments named the extension file (``HorovodBasics(__file__, "mpi_lib")``); they are accepted
    and not used. ``Average``, ``Sum``, ``Adasum``, ``Min``, ``Max`` and ``Product`` are the
    reduction ops, as on Horovod's instances.
    """

    def __init__(self, pkg_path: str | None = None, *args: str) -> None:
        del pkg_path, args  # Horovod's extension file: hvd has none per framework

    def __getattr__(self, name: str) -> Any:
        # The reduction ops come from the collectives, which load the native engine: only when asked.
        if name in ("Average", "Sum", "Adasum", "Min", "Max", "Product"):
            from horovod.common import collectives

            return getattr(collectives, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def init(self, comm: Any = None, process_sets: Any = None) -> None:
        init(comm, process_sets)

    def shutdown(self) -> None:
        shutdown()

    def is_initialized(self) -> bool:
        return is_initialized()

    def start_timeline(self, file_path: str, mark_cycles: bool = False) -> None:
        start_timeline(file_path, mark_cycles)

    def stop_timeline(self) -> None:
        stop_timeline()

    def size(self) -> int:
        return size()

    def local_size(self) -> int:
        return local_size()

    def cross_size(self) -> int:
        return cross_size()

    def rank(self) -> int:
        return rank()

    def local_rank(self) -> int:
        return local_rank()

    def cross_rank(self) -> int:
        return cross_rank()

    def is_homogeneous(self) -> bool:
        return is_homogeneous()

    def mpi_threads_supported(self) -> bool:
        return mpi_threads_supported()

    def mpi_enabled(self) -> bool:
        return mpi_enabled()

    def mpi_built(self) -> bool:
        return mpi_built()

    def gloo_enabled(self) -> bool:
        return gloo_enabled()

    def gloo_built(self) -> bool:
        return gloo_built()

    def nccl_built(self) -> bool:
        return nccl_built()

    def ddl_built(self) -> bool:
        return ddl_built()

    def ccl_built(self) -> bool:
        return ccl_built()

    def cuda_built(self) -> bool:
        return cuda_built()

    def rocm_built(self) -> bool:
        return rocm_built()
