"""Which backend runs the collectives of GPU tensors: ``HOROVOD_GPU_OPERATIONS`` and its per-op
variants, as Horovod names them.

Horovod chose these when it was compiled (``HOROVOD_GPU_OPERATIONS=NCCL pip install horovod``); hvd
reads the same variables when a job starts:

- ``HOROVOD_GPU_OPERATIONS=NCCL`` sends every collective on GPU tensors to the NCCL backend
  (hvd-backend-nccl), and ``HOROVOD_GPU_ALLREDUCE``, ``HOROVOD_GPU_ALLGATHER``,
  ``HOROVOD_GPU_BROADCAST``, ``HOROVOD_GPU_ALLTOALL`` and ``HOROVOD_GPU_REDUCESCATTER`` decide one
  collective each, over it.
- A CPU backend's name there (``MPI``, ``GLOO``) stages those tensors through host memory and the
  job's CPU backend instead.
- Nothing set: a GPU backend that is installed takes every collective (the highest priority one:
  NCCL); if it cannot be loaded (no NCCL library), GPU tensors are staged, with a warning. One that
  was asked for and cannot be loaded is an error at ``init()``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from horovod.common.plugins import PluginError

_log = logging.getLogger("horovod")

#: The variable deciding all of them, then each collective's own, as Horovod spells them.
ALL_OPERATIONS = "HOROVOD_GPU_OPERATIONS"
PER_OPERATION = {
    "allreduce": "HOROVOD_GPU_ALLREDUCE",
    "allgather": "HOROVOD_GPU_ALLGATHER",
    "broadcast": "HOROVOD_GPU_BROADCAST",
    "alltoall": "HOROVOD_GPU_ALLTOALL",
    "reducescatter": "HOROVOD_GPU_REDUCESCATTER",
}


@dataclasses.dataclass(frozen=True)
class GpuOperations:
    """The GPU backend a job loads beside its CPU backend, and the collectives it takes."""

    #: The backend's description (a ``BackendSpec``), or None: every GPU tensor is staged.
    spec: Any
    #: The collectives it takes, by the names of :data:`PER_OPERATION`.
    operations: frozenset[str]
    #: Whether the user named it (then failing to load it is an error, not a warning).
    requested: bool

    def op_mask(self, core: Any) -> int:
        """The engine's ``device_ops``: a bit per op type it takes."""
        if self.spec is None:
            return 0
        codes = {name: getattr(core, f"OP_{name.upper()}") for name in PER_OPERATION}
        return sum(1 << codes[name] for name in self.operations)


def _asked(env: Mapping[str, str]) -> dict[str, str]:
    """Each collective's backend name as the variables ask it (lower case), where any does."""
    everything = env.get(ALL_OPERATIONS, "").strip().lower()
    asked = {}
    for op, key in PER_OPERATION.items():
        value = env.get(key, "").strip().lower() or everything
        if value:
            asked[op] = value
    return asked


def choose(plugins: Any, env: Mapping[str, str]) -> GpuOperations:
    """What ``env`` asks for among the installed backends (a ValueError names a variable asking for
    a backend that is not installed, or two GPU backends at once)."""
    asked = _asked(env)
    if not asked:
        try:
            spec = plugins.default_backend("cuda")
        except PluginError:
            return GpuOperations(None, frozenset(), requested=False)
        return GpuOperations(spec, frozenset(PER_OPERATION), requested=False)
    installed = plugins.backends()
    on_gpu: dict[str, list[str]] = {}
    for op, name in asked.items():
        spec = installed.get(name)
        if spec is None:
            key = PER_OPERATION[op] if env.get(PER_OPERATION[op], "").strip() else ALL_OPERATIONS
            known = ", ".join(sorted(n.upper() for n in installed)) or "none"
            raise ValueError(
                f"{key}={name.upper()} names no installed backend (installed: {known}); "
                f"for NCCL: pip install hvd-backend-nccl"
            )
        if "cuda" in spec.device_kinds:
            on_gpu.setdefault(name, []).append(op)
    if len(on_gpu) > 1:
        raise ValueError(
            "one GPU backend serves a job, but the HOROVOD_GPU_* variables name "
            + " and ".join(f"{name.upper()} (for {', '.join(ops)})" for name, ops in sorted(on_gpu.items()))
        )
    if not on_gpu:  # CPU backends named: everything staged
        return GpuOperations(None, frozenset(), requested=True)
    (name, ops), *_ = on_gpu.items()
    return GpuOperations(installed[name], frozenset(ops), requested=True)


def load(core: Any, choice: GpuOperations, *, rank: int) -> Any:
    """The chosen GPU backend, loaded (a ``_core.Backend``), or None. A backend asked for that cannot
    be loaded raises; the default one is skipped with a warning (rank 0), GPU tensors then staged."""
    if choice.spec is None:
        return None
    try:
        return core.Backend.load(choice.spec.library_path())
    except (OSError, ValueError, RuntimeError) as error:
        if choice.requested:
            raise type(error)(f"{ALL_OPERATIONS}: the {choice.spec.name} backend cannot be used: {error}") from error
        if rank == 0:
            _log.warning(
                "the %s backend is installed but cannot be used (%s): GPU tensors are staged through host "
                "memory and the CPU backend",
                choice.spec.name,
                error,
            )
        return None
