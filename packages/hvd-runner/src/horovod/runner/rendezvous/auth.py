"""Signing and verifying rendezvous requests and responses (HMAC-SHA256 with the job's secret).

Shared by the server and the client, so both compute exactly the same message. A request is
signed over its method, its path (query included), a timestamp, a random nonce and the SHA-256 of
its body; a response over its status, the nonce of the request it answers and the SHA-256 of its
body, so a response cannot be replayed to another request. Signatures are compared with
``hmac.compare_digest``.

The secret itself never leaves the launcher and its ranks' environments: it is not a header, not a
command-line argument and never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time

#: Header names (HTTP header names are case-insensitive; these are how we send them).
TIMESTAMP_HEADER = "X-Hvd-Timestamp"
NONCE_HEADER = "X-Hvd-Nonce"
SIGNATURE_HEADER = "X-Hvd-Signature"

#: Length in bytes of a job secret.
SECRET_BYTES = 32
#: Requests whose timestamp is further than this from the server's clock are refused; nonces are
#: remembered at least this long, so a captured request cannot be replayed later.
MAX_CLOCK_SKEW_S = 120.0

_PROTOCOL = b"hvd-rendezvous-v1"
_NONCE_RE = re.compile(r"^[0-9a-f]{32}$")
_TIMESTAMP_RE = re.compile(r"^[0-9]{1,16}$")
_SIGNATURE_RE = re.compile(r"^[0-9a-f]{64}$")


def new_secret() -> bytes:
    """A fresh per-job secret."""
    return secrets.token_bytes(SECRET_BYTES)


def encode_secret(secret: bytes) -> str:
    """The secret as it travels in a rank's environment (hex)."""
    return secret.hex()


def decode_secret(text: str) -> bytes:
    """Parses :func:`encode_secret`'s output; raises ValueError (without echoing it) when malformed."""
    try:
        secret = bytes.fromhex(text.strip())
    except ValueError:
        raise ValueError("the rendezvous secret is not a hex string") from None
    if len(secret) != SECRET_BYTES:
        raise ValueError(f"the rendezvous secret must be {SECRET_BYTES} bytes, got {len(secret)}")
    return secret


def new_nonce() -> str:
    return secrets.token_hex(16)


def timestamp_ms(now: float | None = None) -> str:
    return str(int((time.time() if now is None else now) * 1000))


def _digest(body: bytes) -> bytes:
    return hashlib.sha256(body).hexdigest().encode()


def request_signature(secret: bytes, method: str, path: str, timestamp: str, nonce: str, body: bytes) -> str:
    message = b"\n".join(
        [
            _PROTOCOL,
            b"request",
            method.upper().encode(),
            path.encode(),
            timestamp.encode(),
            nonce.encode(),
            _digest(body),
        ]
    )
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def response_signature(secret: bytes, status: int, nonce: str, body: bytes) -> str:
    message = b"\n".join([_PROTOCOL, b"response", str(status).encode(), nonce.encode(), _digest(body)])
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def sign_request(secret: bytes, method: str, path: str, body: bytes) -> dict[str, str]:
    """The authentication headers of one request (a fresh nonce each call)."""
    ts, nonce = timestamp_ms(), new_nonce()
    return {
        TIMESTAMP_HEADER: ts,
        NONCE_HEADER: nonce,
        SIGNATURE_HEADER: request_signature(secret, method, path, ts, nonce, body),
    }


def well_formed(timestamp: str | None, nonce: str | None, signature: str | None) -> bool:
    """Whether the three authentication headers are present and have the expected shape."""
    return bool(
        timestamp
        and nonce
        and signature
        and _TIMESTAMP_RE.match(timestamp)
        and _NONCE_RE.match(nonce)
        and _SIGNATURE_RE.match(signature)
    )


def signature_matches(expected: str, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())


def is_fresh(timestamp: str, now: float | None = None, skew_s: float = MAX_CLOCK_SKEW_S) -> bool:
    now_ms = (time.time() if now is None else now) * 1000
    return abs(now_ms - int(timestamp)) <= skew_s * 1000
