"""A job's rendezvous server started by a driver that is not horovodrun (hvd-ray, hvd-spark), and
the environment common to every worker of the job.

The same authenticated server horovodrun runs: workers find it through the ``HOROVOD_RENDEZVOUS_*``
variables, which the driver hands to each worker itself (never through a cluster manager's job
environment, which such systems show in their dashboards).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from horovod.runner.job import common_environment
from horovod.runner.rendezvous import auth
from horovod.runner.rendezvous.server import DEFAULT_MAX_VALUE_BYTES, RendezvousServer
from horovod.runner.settings import JobSettings


def interface_address(nic: str) -> str:
    """The first IPv4 address of ``nic`` on this machine; ValueError naming it when it has none."""
    from horovod.runner.interfaces import local_interfaces

    addresses = local_interfaces().get(nic, [])
    if not addresses:
        raise ValueError(f"nics: interface {nic!r} has no IPv4 address on this machine")
    return addresses[0].split("/", 1)[0]


class JobRendezvous:
    """A started rendezvous server bound to ``host`` and the environment common to every worker.

    ``transient_prefix``: keys under ``<job key>/<transient_prefix>`` are handed to ``on_set`` and
    never stored (a stream, such as the workers' output, that would otherwise fill the store)."""

    def __init__(
        self,
        host: str,
        nics: list[str] | None,
        gloo_timeout_s: int,
        extra_env: dict[str, str] | None = None,
        *,
        job_prefix: str = "hvd",
        on_set: Callable[[str, bytes], None] | None = None,
        transient_prefix: str | None = None,
    ) -> None:
        self.secret = auth.new_secret()
        self.job_key = f"{job_prefix}-{secrets.token_hex(8)}"
        transient = f"{self.job_key}/{transient_prefix}" if transient_prefix else None
        self.server = RendezvousServer(self.secret, host=host, transient_prefix=transient)
        self.server.watch(on_set)
        self.server.start()
        settings = JobSettings(placements=[], env={}, start_timeout_s=gloo_timeout_s)
        self.env = common_environment(
            settings,
            {},
            job_key=self.job_key,
            addr=self.server.host,
            port=self.server.port,
            secret=self.secret,
            max_value=DEFAULT_MAX_VALUE_BYTES,
            nics=tuple(nics or ()),
        )
        self.env["HOROVOD_GLOO_TIMEOUT_SECONDS"] = str(gloo_timeout_s)
        self.env.update(extra_env or {})

    def stop(self) -> None:
        self.server.stop()
