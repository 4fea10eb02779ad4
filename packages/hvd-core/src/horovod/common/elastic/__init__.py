"""Elastic training, framework-free: the State contract, the run loop and the driver protocol.

Framework packages build on it (``horovod.torch.elastic.TorchState``...); launchers speak
:mod:`horovod.common.elastic.protocol`. The names below load on first use, so that ``init()`` can
read the protocol without loading the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from horovod.common.elastic.assignment import last_assignment as last_assignment
    from horovod.common.elastic.loop import run as run
    from horovod.common.elastic.loop import run_fn as run_fn
    from horovod.common.elastic.notifications import WorkerNotificationManager as WorkerNotificationManager
    from horovod.common.elastic.notifications import notification_manager as notification_manager
    from horovod.common.elastic.protocol import HostUpdateResult as HostUpdateResult
    from horovod.common.elastic.state import ObjectState as ObjectState
    from horovod.common.elastic.state import State as State

_WHERE = {
    "State": "state",
    "ObjectState": "state",
    "run_fn": "loop",
    "run": "loop",
    "notification_manager": "notifications",
    "WorkerNotificationManager": "notifications",
    "HostUpdateResult": "protocol",
    "last_assignment": "assignment",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'horovod.common.elastic' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"horovod.common.elastic.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
