"""The registration service between a compute job (tf.data service dispatchers and workers) and the
training jobs it feeds: who registered where, who waits for whom, and the shutdown.

It is hvd-runner's rendezvous server (an HMAC-authenticated key-value store over HTTP), started by
the compute job's rank 0 with a secret of its own, which the config file carries to the training
job: a client without the key is refused. Keys:

- ``dispatcher/<i>``: dispatcher i's address (``grpc://host:port``);
- ``worker/<i>/<w>``: compute rank w's worker serves dispatcher i;
- ``shutdown``: the training job is done; the compute job stops its servers and exits.

Every wait is bounded, and says what did not arrive.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

POLL_S = 1.0  # a wait for a key asks the server again after this long (it answers when it is set)


# hvd-runner's rendezvous, imported when the data service is used (hvd-runner starts its jobs).
def _rendezvous() -> tuple[Any, Any, Any, Any]:
    try:
        from horovod.runner.rendezvous import auth
        from horovod.runner.rendezvous.client import RendezvousClient, RendezvousError
        from horovod.runner.rendezvous.server import RendezvousServer
    except ImportError as error:
        raise ImportError(
            "the tf.data service of horovod.tensorflow.data needs hvd-runner (pip install hvd-runner)"
        ) from error
    return auth, RendezvousClient, RendezvousError, RendezvousServer


def _unreachable(error: BaseException) -> bool:
    """Whether a rendezvous client's error says the server is not there (rather than refusing)."""
    return isinstance(error.__cause__, OSError)


def job_address(interface: str | None = None) -> tuple[str, str]:
    """(interface, IPv4 address) where this host is reached by the job's peers: ``interface``, else
    the interface the launcher chose for the job (HOROVOD_GLOO_IFACE), else loopback (a job on one
    machine)."""
    interface = interface or os.environ.get("HOROVOD_GLOO_IFACE", "").strip()
    if not interface:
        return "lo", "127.0.0.1"
    from horovod.runner.interfaces import local_interfaces

    addresses = local_interfaces().get(interface)
    if not addresses:
        raise RuntimeError(
            f"this host has no IPv4 address on interface {interface!r} "
            "(--dispatchers-nic, or the job's: HOROVOD_GLOO_IFACE)"
        )
    return interface, addresses[0].split("/", 1)[0]


class ComputeService:
    """Rank 0 of the compute job: the registration server, until ``shutdown()``, on ``interface``
    (see job_address)."""

    def __init__(self, interface: str | None = None) -> None:
        auth, _, _, server_class = _rendezvous()
        self.key = auth.new_secret()
        self.interface, host = job_address(interface)
        self._server = server_class(self.key, host=host).start()

    def addresses(self) -> dict[str, list[tuple[str, int]]]:
        """Where clients reach it, by interface (Horovod's format)."""
        return {self.interface: [(self._server.host, self._server.port)]}

    def shutdown(self) -> None:
        self._server.stop()


class ComputeClient:
    """A compute or training rank's view of the registration service.

    :param addresses: the service's addresses by interface (``TfDataServiceConfig.addresses``).
    :param key: the service's secret (``TfDataServiceConfig.key``).
    :param workers_per_dispatcher: how many compute ranks serve each dispatcher.
    :param verbose: 0 is silent; above, waits say what they wait for.
    """

    def __init__(
        self,
        addresses: Mapping[str, Sequence[tuple[str, int]]],
        key: bytes,
        workers_per_dispatcher: int = 1,
        verbose: int = 1,
    ) -> None:
        _, client_class, self._error, _ = _rendezvous()
        candidates = [(host, int(port)) for listed in addresses.values() for host, port in listed]
        if not candidates:
            raise ValueError("the compute service's config lists no address")
        host, port = candidates[0]
        self._client = client_class(host, port, key)
        self.where = f"{host}:{port}"
        self.workers_per_dispatcher = workers_per_dispatcher
        self.verbose = verbose

    def _get(self, key: str, timeout: float, what: str) -> bytes:
        deadline = time.monotonic() + timeout
        if self.verbose:
            print(f"horovod.tensorflow.data: waiting up to {timeout:g} s for {what}", flush=True)
        while True:
            try:
                value = self._client.get(key, min(POLL_S, max(0.0, deadline - time.monotonic())))
            except self._error as error:
                if _unreachable(error):
                    raise RuntimeError(
                        f"the compute service at {self.where} cannot be reached while waiting for {what}: "
                        "is the compute job running?"
                    ) from None
                raise RuntimeError(f"the compute service at {self.where} refused this client ({error})") from None
            if value is not None:
                return bytes(value)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{what} did not happen within {timeout:g} s (compute service at {self.where})")

    def _set(self, key: str, value: bytes) -> None:
        try:
            self._client.set(key, value)
        except self._error as error:
            raise RuntimeError(f"the compute service at {self.where} refused this client ({error})") from None

    def register_dispatcher(self, index: int, address: str) -> None:
        """Dispatcher ``index`` serves at ``address`` (``grpc://host:port``)."""
        self._set(f"dispatcher/{index}", address.encode())

    def wait_for_dispatcher_registration(self, index: int, timeout: float) -> str:
        """Dispatcher ``index``'s address, once registered."""
        return self._get(f"dispatcher/{index}", timeout, f"dispatcher {index} to register").decode()

    def register_worker_for_dispatcher(self, index: int, worker: int) -> None:
        """Compute rank ``worker``'s tf.data worker serves dispatcher ``index``."""
        self._set(f"worker/{index}/{worker}", b"1")

    def wait_for_dispatcher_worker_registration(self, index: int, timeout: float) -> None:
        """Until every worker of dispatcher ``index`` has registered."""
        deadline = time.monotonic() + timeout
        first = index * self.workers_per_dispatcher
        for worker in range(first, first + self.workers_per_dispatcher):
            left = max(0.0, deadline - time.monotonic())
            self._get(f"worker/{index}/{worker}", left, f"compute rank {worker}'s worker for dispatcher {index}")

    def probe(self) -> str:
        """``"running"``, ``"shutting down"`` (the training job asked it to stop) or ``"gone"``
        (the service does not answer: the compute job stopped)."""
        try:
            return "running" if self._client.get("shutdown", 0.0) is None else "shutting down"
        except self._error as error:
            if _unreachable(error):
                return "gone"
            # It answers: ending (its rank 0 stopped it), or refusing this client while it runs.
            return "shutting down" if "shutting down" in str(error) else "running"

    def shutdown(self) -> None:
        """Ends the compute job: its ranks stop their servers and exit."""
        self._set("shutdown", b"1")

    def wait_for_shutdown(self, timeout: float | None = None) -> None:
        """Until the training job asks for the shutdown (``timeout`` None: however long that takes)."""
        while True:
            try:
                if self._client.get("shutdown", POLL_S if timeout is None else timeout) is not None:
                    return
            except self._error as error:
                if _unreachable(error):
                    return  # the service is gone: its rank 0 stopped, and with it the job
                raise RuntimeError(f"the compute service at {self.where} refused this client ({error})") from None
            if timeout is not None:
                raise TimeoutError(f"no shutdown request within {timeout:g} s")
