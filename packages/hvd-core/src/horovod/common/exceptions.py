"""Exceptions raised by hvd, with Horovod's names where Horovod had them."""

from __future__ import annotations

from typing import Protocol

# Horovod's names for a framework whose version differs from the one it was built with (hvd builds
# against no framework, so it never raises it; scripts import it from here).
from horovod.common.version_check import HorovodVersionMismatchError as HorovodVersionMismatchError
from horovod.common.version_check import get_version_mismatch_message as get_version_mismatch_message


class HorovodInternalError(RuntimeError):
    """Communication failed: a peer was lost, a backend call failed, or the engine stopped.

    Elastic training catches this to restore the last committed state and re-initialise.
    """


class HostsUpdatedInterrupt(RuntimeError):
    """The set of hosts changed during elastic training; raised to restart from a sync point.

    :param skip_sync: ``True`` when hosts were only removed: every remaining worker holds the last committed state, so
        it is not synchronised again before training resumes.
    """

    def __init__(self, skip_sync: bool = False) -> None:
        super().__init__("the set of hosts changed")
        self.skip_sync = skip_sync


class CollectiveMismatchError(RuntimeError):
    """Ranks disagreed about a collective (shape, dtype, op, root...). Raised on every rank."""


class UnsupportedOperationError(ValueError, NotImplementedError):
    """A combination of arguments that hvd does not run (e.g. reducescatter with op=hvd.Adasum).

    Horovod raises RuntimeError (NotImplementedError, HorovodInternalError) for most such
    combinations, where hvd used to raise ValueError: this class is both (and a
    NotImplementedError, itself a RuntimeError), so that code catching either keeps working. It is
    raised on the calling rank before anything is submitted, never by a failed collective, so
    elastic training does not take it for a lost peer.
    """


class _NativeEngine(Protocol):
    """The part of the native extension module that install_exception_types uses."""

    def set_exception_types(self, invalid_argument: object, mismatch: object, aborted: object, /) -> None: ...


def install_exception_types(core: _NativeEngine) -> None:
    """Tells the native engine which Python exceptions to raise for each failure kind."""
    core.set_exception_types(ValueError, CollectiveMismatchError, HorovodInternalError)
