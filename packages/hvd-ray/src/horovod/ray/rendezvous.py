"""The job's rendezvous server, run by the Ray driver, and what every worker is told to reach it.

The same authenticated server horovodrun runs: workers find it through the ``HOROVOD_RENDEZVOUS_*``
variables, given to each actor by a method call (never through Ray's runtime environment, which Ray
shows in its dashboard and state API).
"""

from __future__ import annotations

import secrets

from horovod.runner.job import common_environment
from horovod.runner.rendezvous import auth
from horovod.runner.rendezvous.server import DEFAULT_MAX_VALUE_BYTES, RendezvousServer
from horovod.runner.settings import JobSettings


def driver_address(nics: list[str] | None) -> str:
    """Where the workers reach this process: the first of ``nics``'s address, else Ray's address
    of this node."""
    if nics:
        from horovod.runner.interfaces import local_interfaces

        addresses = local_interfaces().get(nics[0], [])
        if not addresses:
            raise ValueError(f"nics={nics}: interface {nics[0]!r} has no IPv4 address on this machine")
        return addresses[0].split("/", 1)[0]
    import ray

    return str(ray.util.get_node_ip_address())


class JobRendezvous:
    """A started rendezvous server and the environment common to every worker of the job."""

    def __init__(self, nics: list[str] | None, gloo_timeout_s: int, extra_env: dict[str, str] | None = None) -> None:
        self.secret = auth.new_secret()
        self.job_key = "hvd-ray-" + secrets.token_hex(8)
        self.server = RendezvousServer(self.secret, host=driver_address(nics)).start()
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
