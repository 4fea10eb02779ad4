"""What elastic training keeps: a State is committed while the world is healthy, restored after a
failure, and synchronised from rank 0 whenever a new world forms (Horovod's ``State`` contract)."""

from __future__ import annotations

import copy
import queue
from collections.abc import Callable
from typing import Any

from horovod.common.elastic import assignment
from horovod.common.elastic.protocol import HostUpdateResult
from horovod.common.exceptions import HostsUpdatedInterrupt


def _default_bcast_object(obj: Any) -> Any:
    from horovod.common.objects import broadcast_object

    return broadcast_object(obj, root_rank=0, name="__hvd.elastic.state")


def _default_rank() -> int:
    from horovod.common.basics import rank

    return rank()


class State:
    """The state of a training process that elastic mode keeps consistent across workers.

    ``commit()`` saves it (in host memory) and checks for host changes; ``restore()`` goes back to
    the last commit after a failure; ``sync()`` makes every worker equal to rank 0. Subclasses
    implement ``save``, ``restore`` and ``sync`` (and may implement ``reset``, called when a new
    world has formed, before the reset callbacks).

    ``bcast_object(obj)`` broadcasts a Python object from rank 0 and ``get_rank()`` is this
    process's rank; both default to horovod.common's.

    :param bcast_object: broadcasts a Python object from rank 0 and returns it on every rank (default:
        ``horovod.common``'s ``broadcast_object``); a framework's state passes its own.
    :param get_rank: returns this process's rank (default: ``horovod.common``'s ``rank``).
    """

    def __init__(
        self, bcast_object: Callable[[Any], Any] | None = None, get_rank: Callable[[], int] | None = None
    ) -> None:
        self._bcast_object = bcast_object or _default_bcast_object
        self._rank = get_rank or _default_rank
        self._host_messages: queue.Queue[tuple[float, int]] = queue.Queue()
        self._last_updated_timestamp = 0.0
        self._reset_callbacks: list[Callable[[], None]] = []

    def register_reset_callbacks(self, callbacks: list[Callable[[], None]]) -> None:
        """Functions called, in order, after each reset (a new world), e.g. to scale the learning rate.

        :param callbacks: functions taking no arguments, added after those already registered.
        """
        self._reset_callbacks.extend(callbacks)

    def on_reset(self) -> None:
        # Updates heard of while the new world formed are kept: check_host_updates drops those the
        # world already reflects (no newer than its assignment's), and acts on the rest, which can
        # arrive before this runs (new workers ready moments after the world formed).
        if assignment.current() is None:
            self._host_messages = queue.Queue()
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp: float, update_res: int) -> None:
        """Records a change in the job's hosts (called by the notification manager); acted on at the
        next :meth:`commit` or :meth:`check_host_updates`.

        :param timestamp: when the driver saw the change (its clock); changes no newer than the current world's are
            ignored.
        :param update_res: what changed, as ``HostUpdateResult`` flags (hosts added, removed, or both).
        """
        self._host_messages.put((timestamp, update_res))

    def commit(self) -> None:
        """Saves the state, then raises HostsUpdatedInterrupt (on every rank at once) if hosts changed."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self) -> None:
        """Raises HostsUpdatedInterrupt on every rank when rank 0 has heard of a change in the hosts
        since the current world formed (collective: every rank calls it at the same point)."""
        # Updates already reflected in the current world (published before it formed) are stale.
        current = assignment.current()
        baseline = max(self._last_updated_timestamp, current.updates_timestamp if current is not None else 0.0)
        prev_timestamp = last_timestamp = baseline
        all_update = HostUpdateResult.no_update
        while not self._host_messages.empty():
            timestamp, update = self._host_messages.get()
            if timestamp > last_timestamp:
                last_timestamp = timestamp
                all_update |= HostUpdateResult(update)
        # Rank 0's view decides, so that every rank raises at the same commit.
        prev_timestamp, self._last_updated_timestamp, all_update = self._bcast_object(
            (prev_timestamp, last_timestamp, int(all_update))
        )
        if self._last_updated_timestamp > prev_timestamp:
            # Only hosts removed: every worker left holds the committed state, so no sync is needed.
            raise HostsUpdatedInterrupt(skip_sync=all_update == HostUpdateResult.removed)

    def save(self) -> None:
        """Saves the state in host memory."""
        raise NotImplementedError

    def restore(self) -> None:
        """Restores the last committed state, undoing uncommitted changes."""
        raise NotImplementedError

    def sync(self) -> None:
        """Makes every worker's state equal to rank 0's."""
        raise NotImplementedError

    def reset(self) -> None:
        """Called when a new world has formed (before the reset callbacks)."""


class ObjectState(State):
    """Plain Python attributes, given as keyword arguments and exposed as attributes of the object.

    ``save()`` keeps a deep copy, so changes made after a commit (to a list, say) are undone by
    ``restore()``; ``sync()`` broadcasts the committed values from rank 0.

    :param bcast_object: broadcasts a Python object from rank 0 and returns it on every rank (default:
        ``horovod.common``'s ``broadcast_object``); a framework's state passes its own.
    :param get_rank: returns this process's rank (default: ``horovod.common``'s ``rank``).
    :param kwargs: the attributes the state holds, with their initial values (each set as an attribute of the object).
    """

    def __init__(
        self, bcast_object: Callable[[Any], Any] | None = None, get_rank: Callable[[], int] | None = None, **kwargs: Any
    ) -> None:
        self._saved_state = copy.deepcopy(kwargs)
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self) -> None:
        self._saved_state = {attr: copy.deepcopy(getattr(self, attr)) for attr in self._saved_state}

    def restore(self) -> None:
        self._set_attrs()

    def sync(self) -> None:
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self) -> None:
        for attr, value in self._saved_state.items():
            setattr(self, attr, copy.deepcopy(value))
