"""A rank tells the launcher when it starts failing, so the launcher can name the rank that failed
first, not merely the one whose process ended first.

When one rank fails, its peers often fail too (their collectives are cut off) and can exit before
it does: the failing rank is still unwinding (printing its traceback, shutting its engine down)
while a peer that got "Horovod has been shut down" is already gone. So each rank started by
horovodrun reports, once, the moment it starts to end: on an uncaught exception (with its type and
message) or, failing that, when the interpreter begins to exit. The launcher keeps the time each
report arrives (its own clock) and, among the ranks that failed, names the one that began first.

An uncaught ``HorovodInternalError`` is reported as *secondary*: it is what a rank gets when Horovod
stopped under it, usually because a peer failed, so it does not make that rank the culprit (its exit
time still counts). The report is a small JSON object, ``{"reason": str, "primary": bool}``.

Installed by ``horovod.runner.hooks`` after ``hvd.init()`` in ranks started by horovodrun.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
from collections.abc import Mapping
from typing import Any

from horovod.runner import worker_env

#: What a rank reports when it exits without an uncaught exception (no reason to show).
EXITING = "exiting"
_REPORT_TIMEOUT_S = 5.0

_lock = threading.Lock()
_installed = False
_reported = False


def key(job_key: str, rank: int | str) -> str:
    """The store key under which rank ``rank`` reports (the launcher watches this prefix)."""
    return f"{key_prefix(job_key)}{rank}"


def key_prefix(job_key: str) -> str:
    return f"{job_key}/runner/exit/"


#: An elastic job's workers report under ``w<worker id>``: their ranks change from world to world.
WORKER_PREFIX = "w"


def reporter_id(env: Mapping[str, str]) -> str:
    """Who reports: the rank, or an elastic worker's id."""
    from horovod.common.plugin_api import elastic_protocol

    if elastic_protocol.is_elastic(env):
        return WORKER_PREFIX + env[elastic_protocol.WORKER_ID]
    return env[worker_env.RANK]


def install() -> None:
    """Reports this rank's uncaught exception, or its exit, to the launcher (once per process)."""
    global _installed
    with _lock:
        if _installed or not os.environ.get(worker_env.RENDEZVOUS_ADDR):
            return
        _installed = True
    previous = sys.excepthook

    def excepthook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        report(f"uncaught {exc_type.__name__}: {exc}", primary=not is_secondary(exc))
        previous(exc_type, exc, tb)

    sys.excepthook = excepthook
    atexit.register(report, EXITING)


def is_secondary(error: BaseException) -> bool:
    """Whether ``error`` is Horovod stopping under this rank (a consequence, not a cause)."""
    from horovod.common import HorovodInternalError

    return isinstance(error, HorovodInternalError)


def encode(reason: str, primary: bool) -> bytes:
    return json.dumps({"reason": reason[:1000], "primary": bool(primary)}).encode()


def decode(value: bytes) -> tuple[str, bool]:
    """(reason, primary) from a report; a malformed one is a primary report of its raw text."""
    try:
        data = json.loads(value.decode("utf-8", "replace"))
        return str(data["reason"]), bool(data["primary"])
    except (ValueError, KeyError, TypeError):
        return value[:1000].decode("utf-8", "replace"), True


def report(reason: str, primary: bool = True, env: Mapping[str, str] | None = None) -> None:
    """Sends ``reason`` to the launcher, the first time only; never raises."""
    global _reported
    env = os.environ if env is None else env
    with _lock:
        if _reported or not env.get(worker_env.RENDEZVOUS_ADDR):
            return
        _reported = True
    try:
        from horovod.runner.rendezvous.client import RendezvousClient

        client = RendezvousClient.from_env(env, request_timeout_s=_REPORT_TIMEOUT_S)
        try:
            client.set(key(env[worker_env.JOB_KEY], reporter_id(env)), encode(reason, primary))
        finally:
            client.close()
    except Exception:  # the launcher still sees the exit itself
        pass
