"""hvd-runner's plugin (entry point ``runner``): connects a rank started by horovodrun to its job.

Loaded by hvd-core's plugin manager in every process, so it imports nothing heavy: the client is
imported only when the environment says this process belongs to a horovodrun job.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from horovod.common.plugin_api import RendezvousStore, hookimpl

# Kept literal (not imported from worker_env) so that this module stays import-light.
_ADDR = "HOROVOD_RENDEZVOUS_ADDR"


@hookimpl
def hvd_rendezvous_store(env: Mapping[str, str]) -> RendezvousStore | None:
    """A client of the launcher's rendezvous server when ``env`` names one, else None."""
    if not env.get(_ADDR, "").strip():
        return None
    from horovod.runner.rendezvous.client import RendezvousClient

    return RendezvousClient.from_env(env)


@hookimpl
def hvd_after_init(rank: int, size: int, backend: str) -> None:
    """In a rank started by horovodrun: report a failure to the launcher as soon as it starts."""
    if os.environ.get(_ADDR, "").strip():
        from horovod.runner import exit_report

        exit_report.install()
