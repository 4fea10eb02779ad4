"""What tests may look at beyond the public API: the job before init(), the running engine.

Tests of every hvd package use these instead of reaching into hvd-core's private modules, so that
hvd-core can rearrange those without breaking other packages' tests.
"""

from __future__ import annotations

from typing import Any

from horovod.common import lifecycle, state
from horovod.common.world import Topology


def job_topology() -> Topology:
    """This rank's place in its job as its launcher describes it, known before ``init()`` (a
    test-kit thread's launch, else the environment's)."""
    launch = state.slot().launch
    if launch is None:
        launch = lifecycle.launch_from_environment()
    return launch.topology


def engine_stats() -> dict[str, Any]:
    """The running engine's counters (``Engine.stats()``): cycles, fused batches, callers blocked..."""
    return dict(state.context().engine.stats())


def running_backend() -> str | None:
    """The name of the backend the running instance uses (None before ``init()``)."""
    return state.running_backend()


def running_gpu_backend() -> str | None:
    """The name of the backend the running instance gives GPU tensors' collectives (None: they are
    staged through the CPU backend, or hvd is not running)."""
    ctx = state.slot().context
    return ctx.engine.device_backend_name if ctx is not None else None


def load_backend(library_path: str) -> Any:
    """A backend library opened by the engine's loader, as ``init()`` would open it: its ``name``,
    ``device_kinds``, ``capabilities`` and ``extensions``, checked against the C ABI."""
    from horovod.common import _core

    return _core.Backend.load(library_path)


def reset_plugins() -> None:
    """Forgets the process's plugin manager, so the next use re-reads entry points and environment."""
    from horovod.common.plugins import reset_plugin_manager

    reset_plugin_manager()
