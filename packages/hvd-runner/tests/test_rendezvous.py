"""The rendezvous server and client: the store protocol, and refusal of every unauthenticated request."""

from __future__ import annotations

import http.client
import socket
import textwrap
import threading
import time
import urllib.parse
from collections.abc import Iterator

import pytest

from conftest import horovodrun, python_ranks
from horovod.common.plugin_api import RendezvousStore
from horovod.runner.rendezvous import auth
from horovod.runner.rendezvous.client import RendezvousClient, RendezvousError
from horovod.runner.rendezvous.server import KV_PREFIX, RendezvousServer

SECRET = bytes(range(32))


@pytest.fixture
def server() -> Iterator[RendezvousServer]:
    with RendezvousServer(SECRET, max_value_bytes=1024, max_keys=16) as srv:
        yield srv


@pytest.fixture
def client(server: RendezvousServer) -> Iterator[RendezvousClient]:
    c = RendezvousClient(server.host, server.port, SECRET, max_value_bytes=1024)
    yield c
    c.close()


def raw(
    server: RendezvousServer, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, bytes, http.client.HTTPResponse]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read(), response
    finally:
        conn.close()


def kv(key: str) -> str:
    return KV_PREFIX + urllib.parse.quote(key, safe="")


# --- the store protocol ------------------------------------------------------------------------


def test_client_is_an_hvd_rendezvous_store(client: RendezvousClient) -> None:
    assert isinstance(client, RendezvousStore)


def test_set_then_get_returns_the_bytes_verbatim(client: RendezvousClient) -> None:
    value = bytes(range(256)) + b"\x80\x04\x95cos\nsystem\n"  # looks like a pickle: must stay opaque bytes
    client.set("job/world/addr", value)
    assert client.get("job/world/addr", timeout=1) == value


def test_keys_with_reserved_characters_round_trip(client: RendezvousClient) -> None:
    key = "a/b c?d&e=f#g%h/ünï"
    client.set(key, b"x")
    assert client.get(key, timeout=1) == b"x"
    assert client.get("a/b c?d&e=f#g%h", timeout=0) is None


def test_set_replaces_a_value(client: RendezvousClient) -> None:
    client.set("k", b"one")
    client.set("k", b"two")
    assert client.get("k", timeout=0) == b"two"


def test_empty_value(client: RendezvousClient) -> None:
    client.set("empty", b"")
    assert client.get("empty", timeout=0) == b""


def test_get_of_a_missing_key_returns_none_after_the_timeout(client: RendezvousClient) -> None:
    assert client.get("never", timeout=0.3) is None


def test_get_waits_for_a_key_set_later(client: RendezvousClient, server: RendezvousServer) -> None:
    setter = RendezvousClient(server.host, server.port, SECRET)
    timer = threading.Timer(0.3, setter.set, args=("late", b"here"))
    timer.start()
    try:
        assert client.get("late", timeout=30) == b"here"
    finally:
        timer.join()
        setter.close()


def test_long_polls_are_capped_and_repeated_by_the_client() -> None:
    with RendezvousServer(SECRET, max_wait_s=0.1) as srv:
        client = RendezvousClient(srv.host, srv.port, SECRET, max_wait_s=0.1)
        setter = RendezvousClient(srv.host, srv.port, SECRET)
        timer = threading.Timer(0.5, setter.set, args=("k", b"v"))
        timer.start()
        try:
            assert client.get("k", timeout=30) == b"v"  # several capped polls, then the value
        finally:
            timer.join()
            client.close()
            setter.close()


def test_many_threads_share_one_client(client: RendezvousClient) -> None:
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            client.set(f"t{i}", str(i).encode())
            assert client.get(f"t{(i + 1) % 8}", timeout=30) == str((i + 1) % 8).encode()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors


def test_client_reconnects_after_the_server_dropped_its_connection(client: RendezvousClient) -> None:
    client.set("a", b"1")
    conn = client._connections[threading.get_ident()]
    conn.sock.shutdown(socket.SHUT_RDWR)  # as if the server had closed the kept-alive connection
    client.set("b", b"2")
    assert client.get("b", timeout=0) == b"2"


def test_server_stop_answers_waiting_gets(server: RendezvousServer) -> None:
    c = RendezvousClient(server.host, server.port, SECRET)
    result: list[object] = []
    t = threading.Thread(target=lambda: result.append(_get_or_error(c, "k", 60)))
    t.start()
    time.sleep(0.2)
    server.stop()
    t.join(30)
    assert not t.is_alive()
    assert result and (result[0] is None or isinstance(result[0], RendezvousError))


def _get_or_error(c: RendezvousClient, key: str, timeout: float) -> object:
    try:
        return c.get(key, timeout)
    except RendezvousError as error:
        return error


# --- limits ------------------------------------------------------------------------------------


def test_client_refuses_a_value_over_the_limit_before_sending(client: RendezvousClient) -> None:
    with pytest.raises(RendezvousError, match="exceeds the rendezvous server's limit of 1024 bytes"):
        client.set("big", b"x" * 1025)
    client.set("just-fits", b"x" * 1024)


def test_too_many_keys_is_refused(server: RendezvousServer, client: RendezvousClient) -> None:
    for i in range(16):
        client.set(f"k{i}", b"")
    client.set("k0", b"replacing an existing key is fine")
    with pytest.raises(RendezvousError, match=r"507.*maximum of 16 keys"):
        client.set("one-too-many", b"")
    assert len(server) == 16


def test_too_many_bytes_is_refused() -> None:
    with RendezvousServer(SECRET, max_total_bytes=100) as srv:
        c = RendezvousClient(srv.host, srv.port, SECRET)
        c.set("a", b"x" * 60)
        with pytest.raises(RendezvousError, match="507"):
            c.set("b", b"x" * 60)
        c.set("a", b"x" * 90)  # replacing frees the old value's bytes
        c.close()


# --- authentication: raw requests ----------------------------------------------------------------


def signed(method: str, path: str, body: bytes = b"", secret: bytes = SECRET) -> dict[str, str]:
    return auth.sign_request(secret, method, path, body)


def test_a_signed_raw_request_is_accepted_and_its_response_signed(server: RendezvousServer) -> None:
    headers = signed("PUT", kv("k"), b"v")
    status, body, response = raw(server, "PUT", kv("k"), b"v", headers)
    assert status == 200
    expected = auth.response_signature(SECRET, 200, headers[auth.NONCE_HEADER], body)
    assert response.getheader(auth.SIGNATURE_HEADER) == expected


def test_request_without_signature_is_refused(server: RendezvousServer) -> None:
    status, _, response = raw(server, "PUT", kv("k"), b"v")
    assert status == 401
    assert response.getheader(auth.SIGNATURE_HEADER) is None
    status, _, _ = raw(server, "GET", kv("k"))
    assert status == 401
    assert len(server) == 0


def test_request_with_malformed_headers_is_refused(server: RendezvousServer) -> None:
    headers = signed("GET", kv("k"))
    headers[auth.NONCE_HEADER] = "not-hex"
    assert raw(server, "GET", kv("k"), headers=headers)[0] == 401


def test_request_with_wrong_signature_is_refused(server: RendezvousServer) -> None:
    headers = signed("PUT", kv("k"), b"v", secret=b"\x01" * 32)
    status, _, response = raw(server, "PUT", kv("k"), b"v", headers)
    assert status == 403
    assert response.getheader(auth.SIGNATURE_HEADER) is None  # no signed answers to strangers
    assert len(server) == 0


def test_signature_covers_the_body_the_path_and_the_method(server: RendezvousServer) -> None:
    headers = signed("PUT", kv("k"), b"v")
    assert raw(server, "PUT", kv("k"), b"tampered", headers)[0] == 403
    headers = signed("PUT", kv("k"), b"v")
    assert raw(server, "PUT", kv("other"), b"v", headers)[0] == 403
    headers = signed("PUT", kv("k"), b"")
    assert raw(server, "GET", kv("k"), b"", headers)[0] == 403
    assert len(server) == 0


def test_replayed_request_is_refused(server: RendezvousServer) -> None:
    headers = signed("PUT", kv("k"), b"v")
    assert raw(server, "PUT", kv("k"), b"v", headers)[0] == 200
    status, body, _ = raw(server, "PUT", kv("k"), b"v", headers)
    assert status == 403 and b"replayed" in body


def test_stale_request_is_refused(server: RendezvousServer) -> None:
    ts = auth.timestamp_ms(time.time() - 3600)
    nonce = auth.new_nonce()
    headers = {
        auth.TIMESTAMP_HEADER: ts,
        auth.NONCE_HEADER: nonce,
        auth.SIGNATURE_HEADER: auth.request_signature(SECRET, "PUT", kv("k"), ts, nonce, b"v"),
    }
    status, body, _ = raw(server, "PUT", kv("k"), b"v", headers)
    assert status == 403 and b"stale" in body
    assert len(server) == 0


def test_oversized_body_is_refused_before_it_is_read(server: RendezvousServer) -> None:
    headers = signed("PUT", kv("k"), b"")
    headers["Content-Length"] = str(1 << 30)
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        conn.putrequest("PUT", kv("k"), skip_accept_encoding=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders()  # the announced gigabyte is never sent
        response = conn.getresponse()
        assert response.status == 413
        response.read()
    finally:
        conn.close()
    assert len(server) == 0


def test_unknown_methods_and_paths_are_refused(server: RendezvousServer) -> None:
    assert raw(server, "DELETE", kv("k"), headers=signed("DELETE", kv("k")))[0] == 501
    assert raw(server, "GET", "/v1/other", headers=signed("GET", "/v1/other"))[0] == 404
    assert raw(server, "GET", KV_PREFIX, headers=signed("GET", KV_PREFIX))[0] == 400


def test_client_with_the_wrong_secret_fails_clearly(server: RendezvousServer) -> None:
    stranger = RendezvousClient(server.host, server.port, b"\x02" * 32)
    with pytest.raises(RendezvousError, match="without a valid signature"):
        stranger.set("k", b"v")
    stranger.close()
    assert len(server) == 0


def test_client_rejects_a_forged_response() -> None:
    """A server that does not know the secret (an impostor on the port) is not believed."""
    with RendezvousServer(b"\x03" * 32) as impostor:
        c = RendezvousClient(impostor.host, impostor.port, SECRET)
        with pytest.raises(RendezvousError, match="without a valid signature"):
            c.get("k", timeout=0)
        c.close()


def test_unreachable_server_is_a_clear_error() -> None:
    with RendezvousServer(SECRET) as srv:
        host, port = srv.host, srv.port
    c = RendezvousClient(host, port, SECRET)
    with pytest.raises(RendezvousError, match="cannot reach the rendezvous server"):
        c.set("k", b"v")


def test_secret_encoding() -> None:
    secret = auth.new_secret()
    assert len(secret) == auth.SECRET_BYTES
    assert auth.decode_secret(auth.encode_secret(secret)) == secret
    with pytest.raises(ValueError, match="32 bytes"):
        auth.decode_secret("abcd")
    with pytest.raises(ValueError, match="not a hex string") as info:
        auth.decode_secret("zz" * 32)
    assert "zz" not in str(info.value)  # the (bad) secret is never echoed


def _non_loopback_address() -> str | None:
    """This machine's address on its default route (a UDP "connect" sends nothing), if it has one."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.255", 9))
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address


def test_a_local_job_server_listens_on_loopback_only(job_env: dict[str, str]) -> None:
    """A job whose ranks all run here binds its rendezvous server to 127.0.0.1: a rank sees that
    address, and the server's port cannot be reached through this machine's network address."""
    address = _non_loopback_address()
    code = textwrap.dedent(
        f"""\
        import os, socket
        import horovod.common as hvd
        hvd.init()
        addr, port = os.environ["HOROVOD_RENDEZVOUS_ADDR"], int(os.environ["HOROVOD_RENDEZVOUS_PORT"])
        outside = {address!r}
        reachable = None
        if outside is not None:
            try:
                socket.create_connection((outside, port), timeout=5).close()
                reachable = True
            except ConnectionRefusedError:
                reachable = False
        print("rendezvous", addr, reachable, flush=True)
        hvd.shutdown()
        """
    )
    result = horovodrun("-np", "2", "-H", "localhost:2", *python_ranks(code), env=job_env)
    assert result.returncode == 0, result.stderr
    seen = [out.split(":", 1)[1] for out in result.stdout.splitlines() if ">:rendezvous " in out]
    expected = "rendezvous 127.0.0.1 " + ("None" if address is None else "False")
    assert seen == [expected, expected], result.stdout
