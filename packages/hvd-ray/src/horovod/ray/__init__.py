"""``horovod.ray``: Horovod jobs on Ray (Horovod's API): ``RayExecutor`` runs a job's workers as Ray
actors; ``ElasticRayExecutor`` keeps an elastic job going as Ray nodes and actors come and go.

Ray is imported when an executor is used, not when this module is.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from horovod.ray.version import __version__

if TYPE_CHECKING:
    from horovod.ray.elastic import ElasticRayExecutor as ElasticRayExecutor
    from horovod.ray.runner import RayExecutor as RayExecutor
    from horovod.ray.runner import WorkerError as WorkerError
    from horovod.ray.worker import BaseHorovodWorker as BaseHorovodWorker

_WHERE = {
    "RayExecutor": "runner",
    "WorkerError": "runner",
    "ElasticRayExecutor": "elastic",
    "BaseHorovodWorker": "worker",
}
__all__ = ["__version__", *sorted(_WHERE)]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'horovod.ray' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"horovod.ray.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
