"""Horovod's worker-side names for host updates (``horovod.runner.elastic.worker``), from hvd-core."""

from __future__ import annotations

from horovod.common.elastic.notifications import WorkerNotificationManager, notification_manager
from horovod.common.elastic.protocol import HostUpdateResult

__all__ = ["HostUpdateResult", "WorkerNotificationManager", "notification_manager"]
