"""Where the current Horovod instance lives: the process's, or one test-kit thread's.

This module sits below every other part of the Python API (it imports only the Context type), so
that collectives, process sets and the queries can all look up the running instance without
importing start-up code. ``horovod.common.lifecycle`` creates and ends instances here.
"""

from __future__ import annotations

import itertools
import threading

from horovod.common.context import Context
from horovod.common.world import Launch, Topology


class Slot:
    """Where a context lives: the process, or one thread of the test kit."""

    def __init__(self, launch: Launch | None = None) -> None:
        self.launch = launch
        self.context: Context | None = None
        self.init_count = itertools.count()


process_slot = Slot()
_thread_state = threading.local()
_thread_slots_used = False  # whether any thread ever got its own slot


def slot() -> Slot:
    # Every collective looks up its context here; the thread-local lookup costs as much as the rest
    # of it, so it is skipped unless the test kit has ever given a thread its own slot.
    return (_thread_slots_used and getattr(_thread_state, "slot", None)) or process_slot


def set_thread_launch(launch: Launch | None) -> None:
    """Gives the calling thread its own launch and context (test kit); None restores the process's."""
    global _thread_slots_used
    _thread_slots_used = True
    _thread_state.slot = Slot(launch) if launch is not None else None


def context() -> Context:
    """The running instance; ValueError (as Horovod raises) before ``init()``."""
    ctx = slot().context
    if ctx is None:
        raise ValueError("Horovod has not been initialized; use hvd.init().")
    return ctx


def is_initialized() -> bool:
    ctx = slot().context
    return ctx is not None and ctx.engine.running


def topology() -> Topology:
    """This process's place in the world ``init()`` created."""
    return context().topology


def running_backend() -> str | None:
    """The backend the running instance uses, None before ``init()``."""
    ctx = slot().context
    return ctx.backend_name if ctx is not None else None
