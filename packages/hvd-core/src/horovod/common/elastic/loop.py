"""``hvd.elastic.run``: the loop that keeps a training function going as workers come and go."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from horovod.common.elastic.notifications import notification_manager
from horovod.common.elastic.state import State
from horovod.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt

_log = logging.getLogger("horovod.elastic")
_R = TypeVar("_R")


def run_fn(func: Callable[..., _R], reset: Callable[[], None]) -> Callable[..., _R]:
    """Wraps ``func(state, *args, **kwargs)`` so that it survives resets.

    Before each try the state is synchronised from rank 0 (a worker that joined gets it then).
    ``HorovodInternalError`` (a peer was lost) restores the last commit; ``HostsUpdatedInterrupt``
    (hosts came or went) keeps the state as it is. Either way ``reset()`` then joins the next world
    (in the same process) and ``func`` runs again. A reset that fails because a peer was lost while
    the world formed is tried again.

    :param func: the training function; it takes the state as its first argument (further arguments are passed through).
    :param reset: joins the next world after a failure or a change of hosts (e.g. ``shutdown()`` then ``init()``).
    """

    @functools.wraps(func)
    def wrapper(state: State, *args: Any, **kwargs: Any) -> _R:
        notification_manager.init()
        notification_manager.register_listener(state)
        skip_sync = False
        try:
            while True:
                try:
                    if not skip_sync:
                        state.sync()
                    return func(state, *args, **kwargs)
                except HorovodInternalError as error:
                    _log.info("elastic: restoring the last commit after: %s", error)
                    state.restore()
                    skip_sync = False
                except HostsUpdatedInterrupt as interrupt:
                    skip_sync = interrupt.skip_sync
                _reset_until_joined(reset)
                state.on_reset()
        finally:
            notification_manager.remove_listener(state)

    return wrapper


def _reset_until_joined(reset: Callable[[], None]) -> None:
    while True:
        try:
            reset()
            return
        except HorovodInternalError as error:  # a peer of the forming world was lost: form the next one
            _log.info("elastic: joining the new world failed (%s); trying again", error)


def _reset() -> None:
    from horovod.common.lifecycle import init, shutdown

    shutdown()
    init()


def run(func: Callable[..., _R]) -> Callable[..., _R]:
    """Decorator: runs ``func(state, ...)`` elastically (see :func:`run_fn`); hvd-core's own reset.

    :param func: the training function, called as ``func(state, *args, **kwargs)``.
    """
    return run_fn(func, _reset)
