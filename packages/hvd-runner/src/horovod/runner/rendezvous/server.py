"""The rendezvous server: an authenticated HTTP key-value store, run by the launcher in a thread.

Protocol (version 1), every request signed as described in :mod:`.auth`:

- ``PUT /v1/kv/<quoted key>`` with the value as body: stores it (replacing any previous value).
- ``GET /v1/kv/<quoted key>?wait=<seconds>``: the value; when the key does not exist yet, waits
  server-side up to ``wait`` seconds (capped at ``max_wait_s``) for it to appear (a long poll),
  then answers 404.

Values are opaque bytes: nothing received is ever interpreted, let alone unpickled. Refused:
missing or malformed authentication headers (401); a wrong signature, a timestamp outside the
allowed clock skew or a nonce seen before (403); a body over ``max_value_bytes`` (413, before it is
read); more than ``max_keys`` keys or ``max_total_bytes`` bytes of values (507); anything once
the server is stopping (503, connection closed). Responses to
authenticated requests are signed, so the client can tell them from forgeries.
"""

from __future__ import annotations

import collections
import http.server
import logging
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from horovod.runner.rendezvous import auth

_log = logging.getLogger("horovod.runner.rendezvous")

KV_PREFIX = "/v1/kv/"
DEFAULT_MAX_VALUE_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_KEYS = 1 << 20
DEFAULT_MAX_TOTAL_BYTES = 4 * 1024 * 1024 * 1024
#: A GET never holds its connection longer than this; clients ask again until their own deadline.
DEFAULT_MAX_WAIT_S = 30.0
MAX_KEY_BYTES = 4096


class StoreFull(Exception):
    """The store holds as many keys or bytes as it may."""


class _Store:
    """The keys and values, with waiting for keys that do not exist yet."""

    def __init__(self, max_keys: int, max_total_bytes: int, transient_prefix: str | None = None) -> None:
        #: Called (outside the lock) after each set, with the key and value: the launcher watches keys.
        self.on_set: Callable[[str, bytes], None] | None = None
        #: Keys under this prefix are only handed to ``on_set``, never stored: a stream of values
        #: (the workers' output) that nobody reads back and that would otherwise fill the store.
        self._transient_prefix = transient_prefix
        self._data: dict[str, bytes] = {}
        self._bytes = 0
        self._max_keys = max_keys
        self._max_total_bytes = max_total_bytes
        self._changed = threading.Condition()
        self._closing = False

    def set(self, key: str, value: bytes) -> None:
        if self._transient_prefix is not None and key.startswith(self._transient_prefix):
            if self.on_set is not None:
                self.on_set(key, value)
            return
        with self._changed:
            old = self._data.get(key)
            new_bytes = self._bytes + len(value) - (len(old) if old is not None else 0)
            if old is None and len(self._data) >= self._max_keys:
                raise StoreFull(f"the store already holds its maximum of {self._max_keys} keys")
            if new_bytes > self._max_total_bytes:
                raise StoreFull(f"the store already holds its maximum of {self._max_total_bytes} bytes")
            self._data[key] = value
            self._bytes = new_bytes
            self._changed.notify_all()
        if self.on_set is not None:
            self.on_set(key, value)

    def get(self, key: str, wait_s: float) -> bytes | None:
        with self._changed:
            self._changed.wait_for(lambda: key in self._data or self._closing, timeout=wait_s)
            return self._data.get(key)

    def close(self) -> None:
        with self._changed:
            self._closing = True
            self._changed.notify_all()

    @property
    def closing(self) -> bool:
        return self._closing

    def __len__(self) -> int:
        with self._changed:
            return len(self._data)


class _NonceCache:
    """Nonces of accepted requests, remembered while their timestamp could still be accepted."""

    def __init__(self, keep_s: float) -> None:
        self._keep_s = keep_s
        self._seen: collections.OrderedDict[str, float] = collections.OrderedDict()  # nonce -> expiry
        self._lock = threading.Lock()

    def check_and_add(self, nonce: str) -> bool:
        """True the first time ``nonce`` is seen, False for a replay."""
        now = time.monotonic()
        with self._lock:
            while self._seen:
                oldest, expiry = next(iter(self._seen.items()))
                if expiry > now:
                    break
                del self._seen[oldest]
            if nonce in self._seen:
                return False
            self._seen[nonce] = now + self._keep_s
            return True


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a rank reuses one connection per thread
    # A reply goes out as two writes (headers, then body): with Nagle's algorithm on, the body waits
    # for the client's delayed ACK of the headers, 40 ms on Linux, on every request (measured: a
    # 2-rank init() took 0.42 s instead of 0.12 s; an elastic world re-formed in 0.37 s, not 0.02 s).
    disable_nagle_algorithm = True
    server_version = "hvd-rendezvous"
    sys_version = ""
    timeout = 300  # an idle kept-alive connection is closed after this; clients reconnect
    server: _HTTPServer

    # --- plumbing ---------------------------------------------------------------------------

    def log_message(self, format: str, *args: Any) -> None:  # `format`: the base class's name
        _log.debug("%s %s", self.address_string(), format % args)

    def _reply(self, status: int, body: bytes = b"", nonce: str | None = None, close: bool = False) -> None:
        """Sends a response; signed when it answers an authenticated request (``nonce`` given)."""
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        if nonce is not None:
            self.send_header(auth.SIGNATURE_HEADER, auth.response_signature(self.server.secret, status, nonce, body))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _authenticate(self) -> tuple[str, bytes] | None:
        """Reads and checks the request; returns (nonce, body), or None after refusing it."""
        if self.server.store.closing:  # a kept-alive connection outliving the server
            self._reply(503, b"the rendezvous server is shutting down", close=True)
            return None
        ts = self.headers.get(auth.TIMESTAMP_HEADER)
        nonce = self.headers.get(auth.NONCE_HEADER)
        signature = self.headers.get(auth.SIGNATURE_HEADER)
        if not auth.well_formed(ts, nonce, signature):
            self._reply(401, b"missing or malformed authentication headers", close=True)
            return None
        assert ts is not None and nonce is not None and signature is not None
        raw_length = self.headers.get("Content-Length", "0")
        try:
            length = int(raw_length)
        except ValueError:
            length = -1
        if length < 0:
            self._reply(400, b"bad Content-Length", close=True)
            return None
        if length > self.server.max_value_bytes:
            # Refused before reading: an oversized body never reaches memory.
            self._reply(
                413, f"body of {length} bytes exceeds the limit of {self.server.max_value_bytes}".encode(), close=True
            )
            return None
        body = self.rfile.read(length) if length else b""
        if len(body) != length:
            self._reply(400, b"truncated body", close=True)
            return None
        expected = auth.request_signature(self.server.secret, self.command, self.path, ts, nonce, body)
        if not auth.signature_matches(expected, signature):
            self._reply(403, b"bad signature", close=True)
            return None
        if not auth.is_fresh(ts, skew_s=self.server.max_clock_skew_s):
            self._reply(403, b"stale timestamp", close=True)
            return None
        if not self.server.nonces.check_and_add(nonce):
            self._reply(403, b"replayed nonce", close=True)
            return None
        return nonce, body

    def _key(self, path: str, nonce: str) -> str | None:
        if not path.startswith(KV_PREFIX):
            self._reply(404, b"unknown path", nonce)
            return None
        try:
            key = urllib.parse.unquote(path[len(KV_PREFIX) :], errors="strict")
        except UnicodeDecodeError:
            key = ""
        if not key or len(key.encode()) > MAX_KEY_BYTES:
            self._reply(400, f"keys must be UTF-8 of 1 to {MAX_KEY_BYTES} bytes".encode(), nonce)
            return None
        return key

    # --- methods ------------------------------------------------------------------------------

    def do_PUT(self) -> None:
        checked = self._authenticate()
        if checked is None:
            return
        nonce, body = checked
        key = self._key(urllib.parse.urlsplit(self.path).path, nonce)
        if key is None:
            return
        try:
            self.server.store.set(key, body)
        except StoreFull as full:
            self._reply(507, str(full).encode(), nonce)
            return
        self._reply(200, b"", nonce)

    def do_GET(self) -> None:
        checked = self._authenticate()
        if checked is None:
            return
        nonce, _ = checked
        parts = urllib.parse.urlsplit(self.path)
        key = self._key(parts.path, nonce)
        if key is None:
            return
        query = urllib.parse.parse_qs(parts.query)
        try:
            wait = float(query.get("wait", ["0"])[0])
        except ValueError:
            self._reply(400, b"wait must be a number of seconds", nonce)
            return
        if not wait >= 0:  # also refuses NaN
            wait = 0.0
        value = self.server.store.get(key, min(wait, self.server.max_wait_s))
        if value is None and self.server.store.closing:
            self._reply(503, b"the rendezvous server is shutting down (the job has ended)", nonce, close=True)
        elif value is None:
            self._reply(404, b"no such key (yet)", nonce)
        else:
            self._reply(200, value, nonce)


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    secret: bytes
    store: _Store
    nonces: _NonceCache
    max_value_bytes: int
    max_wait_s: float
    max_clock_skew_s: float

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A rank that dies mid-request resets its connection: routine when a job fails, so no
        # traceback on the launcher's stderr (socketserver's default).
        _log.debug("rendezvous request from %s failed", client_address, exc_info=True)


class RendezvousServer:
    """The job's key-value store, served over HTTP from a background thread of the launcher.

    ``host`` is the address to bind: 127.0.0.1 for a job whose ranks all run on this machine.
    """

    def __init__(
        self,
        secret: bytes,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        max_keys: int = DEFAULT_MAX_KEYS,
        max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
        max_wait_s: float = DEFAULT_MAX_WAIT_S,
        max_clock_skew_s: float = auth.MAX_CLOCK_SKEW_S,
        transient_prefix: str | None = None,
    ) -> None:
        if len(secret) < 16:
            raise ValueError("the rendezvous secret must have at least 16 bytes")
        self._httpd = _HTTPServer((host, port), _Handler, bind_and_activate=True)
        self._httpd.secret = secret
        self._httpd.store = _Store(max_keys, max_total_bytes, transient_prefix)
        # A nonce must be remembered as long as its timestamp could be accepted: skew both ways.
        self._httpd.nonces = _NonceCache(2 * max_clock_skew_s + 1)
        self._httpd.max_value_bytes = max_value_bytes
        self._httpd.max_wait_s = max_wait_s
        self._httpd.max_clock_skew_s = max_clock_skew_s
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def max_value_bytes(self) -> int:
        return self._httpd.max_value_bytes

    def __len__(self) -> int:
        """Number of keys stored."""
        return len(self._httpd.store)

    def set(self, key: str, value: bytes) -> None:
        """Stores ``value`` under ``key`` on behalf of the launcher itself (no request involved)."""
        self._httpd.store.set(key, value)

    def get(self, key: str) -> bytes | None:
        """The value under ``key`` now, for the launcher itself (no waiting, no request)."""
        return self._httpd.store.get(key, 0.0)

    def watch(self, callback: Callable[[str, bytes], None] | None) -> None:
        """Calls ``callback(key, value)`` (in a server thread) after every set."""
        self._httpd.store.on_set = callback

    def start(self) -> RendezvousServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1}, name="hvd-rendezvous", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops serving; GETs still waiting are answered at once. Idempotent."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.store.close()
        self._httpd.server_close()

    def __enter__(self) -> RendezvousServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
