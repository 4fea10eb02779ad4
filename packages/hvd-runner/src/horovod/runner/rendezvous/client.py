"""The rendezvous client: the key-value store a rank's engine uses to reach its peers.

It implements hvd-core's ``RendezvousStore`` protocol (``set(key, value)``, ``get(key, timeout)``).
Every request is signed and every response's signature checked (:mod:`.auth`). Each thread keeps
one HTTP/1.1 connection to the server and reuses it; ``get`` waits server-side (long poll), so a
rank waiting for a key costs one request per ``max_wait_s``, not a busy loop.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
import urllib.parse
from collections.abc import Mapping

from horovod.runner import worker_env
from horovod.runner.rendezvous import auth
from horovod.runner.rendezvous.server import DEFAULT_MAX_VALUE_BYTES, DEFAULT_MAX_WAIT_S, KV_PREFIX

#: Socket timeout of a request that does not wait server-side.
REQUEST_TIMEOUT_S = 60.0


class RendezvousError(RuntimeError):
    """The rendezvous server refused a request, answered with a bad signature, or is unreachable."""


class RendezvousClient:
    """A connection to the launcher's rendezvous server (one HTTP connection per thread)."""

    def __init__(
        self,
        host: str,
        port: int,
        secret: bytes,
        *,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        max_wait_s: float = DEFAULT_MAX_WAIT_S,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self._host = host
        self._request_timeout_s = request_timeout_s
        self._port = int(port)
        self._secret = secret
        self._max_value_bytes = max_value_bytes
        self._max_wait_s = max_wait_s
        # One connection per thread, by thread id; a dead thread's connection is closed when the
        # next one is made (never left to the garbage collector, which would warn).
        self._connections: dict[int, http.client.HTTPConnection] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str],
        *,
        max_wait_s: float = DEFAULT_MAX_WAIT_S,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> RendezvousClient:
        """The client for the job ``env`` describes (the variables of :mod:`horovod.runner.worker_env`)."""
        host = env.get(worker_env.RENDEZVOUS_ADDR, "").strip()
        port_text = env.get(worker_env.RENDEZVOUS_PORT, "").strip()
        secret_text = env.get(worker_env.RENDEZVOUS_SECRET, "")
        missing = [
            name
            for name, value in (
                (worker_env.RENDEZVOUS_ADDR, host),
                (worker_env.RENDEZVOUS_PORT, port_text),
                (worker_env.RENDEZVOUS_SECRET, secret_text),
            )
            if not value
        ]
        if missing:
            raise RendezvousError(
                f"incomplete rendezvous settings: {', '.join(missing)} not set "
                f"(they are set by horovodrun; {worker_env.RENDEZVOUS_ADDR} alone is not enough)"
            )
        try:
            port = int(port_text)
        except ValueError:
            raise RendezvousError(f"{worker_env.RENDEZVOUS_PORT}={port_text!r} is not a port number") from None
        try:
            secret = auth.decode_secret(secret_text)
        except ValueError as error:
            raise RendezvousError(f"{worker_env.RENDEZVOUS_SECRET} is invalid: {error}") from None
        limit_text = env.get(worker_env.RENDEZVOUS_MAX_VALUE_BYTES, "").strip()
        max_value = int(limit_text) if limit_text.isdigit() else DEFAULT_MAX_VALUE_BYTES
        return cls(
            host, port, secret, max_value_bytes=max_value, max_wait_s=max_wait_s, request_timeout_s=request_timeout_s
        )

    @property
    def address(self) -> tuple[str, int]:
        return self._host, self._port

    # --- the store protocol ---------------------------------------------------------------------

    def set(self, key: str, value: bytes) -> None:
        value = bytes(value)
        if len(value) > self._max_value_bytes:
            raise RendezvousError(
                f"value of {len(value)} bytes for key {key!r} exceeds the rendezvous server's limit of "
                f"{self._max_value_bytes} bytes (the launcher's {worker_env.RENDEZVOUS_MAX_VALUE_BYTES})"
            )
        status, body = self._request("PUT", self._path(key), value, self._request_timeout_s)
        if status != 200:
            raise RendezvousError(f"rendezvous server refused to set key {key!r}: {status} {_text(body)}")

    def get(self, key: str, timeout: float) -> bytes | None:
        """The value of ``key``, waiting up to ``timeout`` seconds for it; None if it never came."""
        deadline = time.monotonic() + max(0.0, float(timeout))
        path = self._path(key)
        while True:
            wait = max(0.0, min(deadline - time.monotonic(), self._max_wait_s))
            status, body = self._request("GET", f"{path}?wait={wait:.3f}", b"", wait + self._request_timeout_s)
            if status == 200:
                return body
            if status != 404:
                raise RendezvousError(f"rendezvous server refused to get key {key!r}: {status} {_text(body)}")
            if deadline - time.monotonic() <= 0:
                return None

    def close(self) -> None:
        """Closes every thread's connection (a later request reconnects)."""
        with self._lock:
            connections = list(self._connections.values())
            self._connections.clear()
        for conn in connections:
            conn.close()

    # --- plumbing -------------------------------------------------------------------------------

    @staticmethod
    def _path(key: str) -> str:
        return KV_PREFIX + urllib.parse.quote(key, safe="")

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection, and whether it was used before (so may have gone stale)."""
        ident = threading.get_ident()
        with self._lock:
            conn = self._connections.get(ident)
            if conn is not None:
                return conn, True
            live = {t.ident for t in threading.enumerate()}
            for dead in [i for i in self._connections if i not in live]:
                self._connections.pop(dead).close()
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self._request_timeout_s)
            self._connections[ident] = conn
            return conn, False

    def _drop_connection(self) -> None:
        with self._lock:
            conn = self._connections.pop(threading.get_ident(), None)
        if conn is not None:
            conn.close()

    def _request(self, method: str, path: str, body: bytes, read_timeout: float) -> tuple[int, bytes]:
        while True:
            conn, reused = self._connection()
            headers = auth.sign_request(self._secret, method, path, body)
            nonce = headers[auth.NONCE_HEADER]
            try:
                if conn.sock is None:
                    conn.connect()
                conn.sock.settimeout(read_timeout)
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
            except (ConnectionError, http.client.HTTPException, OSError) as error:
                self._drop_connection()
                stale = isinstance(error, (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine))
                if reused and stale:
                    continue  # the server closed an idle kept-alive connection: retry on a new one
                if isinstance(error, (socket.timeout, TimeoutError)):
                    raise RendezvousError(
                        f"rendezvous server {self._host}:{self._port} did not answer within {read_timeout:.0f} s"
                    ) from error
                raise RendezvousError(
                    f"cannot reach the rendezvous server {self._host}:{self._port} "
                    f"(has the launcher exited?): {type(error).__name__}: {error}"
                ) from error
            expected = auth.response_signature(self._secret, response.status, nonce, data)
            if not auth.signature_matches(expected, response.getheader(auth.SIGNATURE_HEADER)):
                self._drop_connection()
                raise RendezvousError(
                    f"rendezvous server {self._host}:{self._port} answered {response.status} without a valid "
                    f"signature: {_text(data)!r} (a refusal, a server shutting down, or not this job's server)"
                )
            if response.will_close:
                self._drop_connection()
            return response.status, data


def _text(body: bytes, limit: int = 200) -> str:
    return body[:limit].decode("utf-8", "replace")
