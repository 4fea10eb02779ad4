"""Horovod's worker-side names for host updates (``horovod.runner.elastic.worker``), from hvd-core."""

from __future__ import annotations

from horovod.common.elastic import HostUpdateResult, WorkerNotificationManager, notification_manager

__all__ = ["HostUpdateResult", "WorkerNotificationManager", "notification_manager"]
