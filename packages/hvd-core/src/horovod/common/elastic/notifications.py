"""Host updates reaching a worker: a thread watches the job's store for the driver's next update.

The driver publishes each change in the set of hosts under a number (1, 2, ...); the watcher waits
for the next number with the store's long poll (one request per 30 s while nothing happens) and
hands each update to the registered listeners (the :class:`~horovod.common.elastic.State` objects
of ``hvd.elastic.run``), which act on it at their next ``commit()`` or ``check_host_updates()``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Protocol

from horovod.common.elastic import assignment, protocol

_log = logging.getLogger("horovod.elastic")

#: Seconds one watch request may wait server-side before it is made again.
_WATCH_S = 30.0
#: Seconds to wait before asking again after the store could not be reached.
_RETRY_S = 1.0


class HostsListener(Protocol):
    def on_hosts_updated(self, timestamp: float, update_res: int) -> None: ...


class WorkerNotificationManager:
    """Horovod's ``notification_manager``: delivers host updates to listeners (one per process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[HostsListener] = []
        self._thread: threading.Thread | None = None

    def init(self) -> None:
        """Starts watching for host updates, in a worker of an elastic job (elsewhere: nothing to watch)."""
        with self._lock:
            if self._thread is not None or not protocol.is_elastic(os.environ):
                return
            self._thread = threading.Thread(target=self._watch, name="hvd-elastic-hosts", daemon=True)
            self._thread.start()

    def register_listener(self, listener: HostsListener) -> None:
        """Adds a listener told of every change in the job's hosts.

        :param listener: an object with ``on_hosts_updated(timestamp, update_res)``, such as a :class:`State`; added
            once however often it is registered.
        """
        with self._lock:
            if listener not in self._listeners:
                self._listeners.append(listener)

    def remove_listener(self, listener: HostsListener) -> None:
        """Stops telling ``listener`` of host changes.

        :param listener: a listener added with :meth:`register_listener` (nothing happens for another).
        """
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def handle_hosts_updated(self, timestamp: float, update_res: int) -> None:
        """Tells every listener that the hosts changed at ``timestamp`` (the driver's clock).

        :param timestamp: when the driver saw the change (its clock).
        :param update_res: what changed, as ``HostUpdateResult`` flags.
        """
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener.on_hosts_updated(timestamp, update_res)

    def _watch(self) -> None:
        from horovod.common.plugins import get_plugin_manager

        env = dict(os.environ)
        job_key = env.get("HOROVOD_JOB_KEY", "job")
        try:
            store = get_plugin_manager().rendezvous_store(env)
        except Exception as error:
            _log.warning("elastic: cannot watch for host updates: %s", error)
            return
        if store is None:
            return
        number = 1
        while True:
            current = assignment.current()
            if current is not None:
                number = max(number, current.updates_seen + 1)
            try:
                value = store.get(protocol.hosts_update_key(job_key, number), _WATCH_S)
            except Exception as error:
                _log.debug("elastic: watching host updates failed: %s", error)
                time.sleep(_RETRY_S)
                continue
            if value is None:
                continue
            try:
                update = protocol.HostsUpdate.decode(value)
            except ValueError as error:
                _log.warning("elastic: %s", error)
            else:
                self.handle_hosts_updated(update.timestamp, update.result)
            number += 1


notification_manager = WorkerNotificationManager()
