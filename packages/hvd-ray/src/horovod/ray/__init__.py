"""``horovod.ray``: Horovod jobs on Ray (Horovod's API): ``RayExecutor`` runs a job's workers as Ray
actors; ``ElasticRayExecutor`` keeps an elastic job going as Ray nodes and actors come and go.

Ray is imported when an executor is used, not when this module is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from horovod.common.plugin_api import lazy_exports
from horovod.ray.version import __version__

if TYPE_CHECKING:
    from horovod.ray.elastic import ElasticRayExecutor as ElasticRayExecutor
    from horovod.ray.runner import RayExecutor as RayExecutor
    from horovod.ray.runner import WorkerError as WorkerError
    from horovod.ray.worker import BaseHorovodWorker as BaseHorovodWorker

__getattr__, __dir__, _names = lazy_exports(
    "horovod.ray",
    globals(),
    {"runner": "RayExecutor WorkerError", "elastic": "ElasticRayExecutor", "worker": "BaseHorovodWorker"},
    ("elastic", "placement", "rendezvous", "runner", "settings", "worker"),
    framework="ray",
    install_hint="pip install ray",
)
__all__ = ["__version__", *_names]
