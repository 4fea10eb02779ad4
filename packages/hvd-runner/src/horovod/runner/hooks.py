"""hvd-runner's plugin (entry point ``runner``): connects a rank started by horovodrun (or by hand,
with Horovod's ``HOROVOD_GLOO_RENDEZVOUS_*`` variables) to its job.

Loaded by hvd-core's plugin manager in every process, so it imports nothing heavy: the client is
imported only when the environment says this process belongs to a horovodrun job.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from horovod.common.plugin_api import RendezvousStore, hookimpl

# Kept literal (not imported from worker_env) so that this module stays import-light.
_ADDR = "HOROVOD_RENDEZVOUS_ADDR"
_PORT = "HOROVOD_RENDEZVOUS_PORT"
_SECRET = "HOROVOD_RENDEZVOUS_SECRET"
_SIZE = "HOROVOD_SIZE"
# Horovod's names of the server, which scripts that start the ranks themselves (without a
# launcher) give them; horovodrun's own names win where both are set.
_HOROVOD_ADDR = "HOROVOD_GLOO_RENDEZVOUS_ADDR"
_HOROVOD_PORT = "HOROVOD_GLOO_RENDEZVOUS_PORT"


def rendezvous_env(env: Mapping[str, str]) -> Mapping[str, str] | None:
    """``env`` with the rendezvous server under horovodrun's names, or None when it names none.

    A rank started by hand (given ``HOROVOD_RANK``, ``HOROVOD_SIZE``... as Horovod's launchers give
    them) may name the server with Horovod's ``HOROVOD_GLOO_RENDEZVOUS_ADDR`` and ``_PORT``. hvd's
    server authenticates every request, so such a rank needs the server's secret too
    (``HOROVOD_RENDEZVOUS_SECRET``); without it the error says how to get one.
    """
    if env.get(_ADDR, "").strip():
        return env
    addr = env.get(_HOROVOD_ADDR, "").strip()
    if not addr or env.get(_SIZE, "").strip() in ("", "1"):
        # Not a rank of a job described by hand (those are given HOROVOD_SIZE, as by Horovod's
        # launchers): variables left over in a shell must not stop a lone process or an MPI job.
        return None
    from horovod.runner.rendezvous.client import RendezvousError

    port = env.get(_HOROVOD_PORT, "").strip()
    if not port:
        raise RendezvousError(f"{_HOROVOD_ADDR} is set, but {_HOROVOD_PORT} is not: give both")
    if not env.get(_SECRET, "").strip():
        raise RendezvousError(
            f"{_HOROVOD_ADDR} names a rendezvous server, but {_SECRET} is not set: hvd's rendezvous server "
            "refuses unsigned requests. Start it with horovod.runner.rendezvous.server.RendezvousServer(secret, "
            "host) and give every rank the secret as horovod.runner.rendezvous.auth.encode_secret(secret) "
            "(or start the ranks with horovodrun, which does all this)"
        )
    return {**env, _ADDR: addr, _PORT: port}


@hookimpl
def hvd_rendezvous_store(env: Mapping[str, str]) -> RendezvousStore | None:
    """A client of the rendezvous server ``env`` names (horovodrun's, or one started by hand), else None."""
    server_env = rendezvous_env(env)
    if server_env is None:
        return None
    from horovod.runner.rendezvous.client import RendezvousClient

    return RendezvousClient.from_env(server_env)


@hookimpl
def hvd_before_shutdown() -> None:
    """In a rank started by horovodrun: its part of the job-end report goes to the launcher."""
    if os.environ.get(_ADDR, "").strip():
        from horovod.runner import job_report

        job_report.post()


@hookimpl
def hvd_after_init(rank: int, size: int, backend: str) -> None:
    """In a rank started by horovodrun: report a failure to the launcher as soon as it starts."""
    if os.environ.get(_ADDR, "").strip():
        from horovod.runner import exit_report

        exit_report.install()
