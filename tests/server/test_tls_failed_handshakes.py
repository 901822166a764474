"""Failed and stalled handshakes cost nothing else: plain HTTP or garbage on the TLS port is
closed at once without an HTTP answer, a silent or trickling client is closed by header_timeout
(a whole-phase deadline, not idle_timeout), and meanwhile every other client is served
without delay."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from pathlib import Path

import pytest

from tests.server.tls_clients import client_context, https_get, start
from tests.support.pki import Pki
from tests.support.raw_client import connect
from tests.support.serve import Launcher, ServerProcess

pytestmark = pytest.mark.timeout(60)

HEADER_TIMEOUT = 1.0  # tls_app's header_timeout, which bounds the handshake
IDLE_TIMEOUT = 2.0  # tls_app's idle_timeout, which bounds a kept-alive connection
PROMPT = 1.0  # "at once": well under the timeouts


def client_hello(pki: Pki) -> bytes:
    """The bytes of a real TLS ClientHello, produced without a socket."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = client_context(pki).wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def seconds_until_closed(sock: socket.socket, limit: float = 8.0) -> tuple[float, bytes]:
    """How long until the server closed `sock`, and what it sent before closing."""
    started = time.monotonic()
    sock.settimeout(limit)
    received = b""
    try:
        while chunk := sock.recv(4096):
            received += chunk
    except ConnectionResetError:
        pass
    return time.monotonic() - started, received


@pytest.mark.parametrize(
    "payload",
    [
        b"GET /ping HTTP/1.1\r\nHost: test\r\n\r\n",
        b"\x00\xff garbage that is no TLS record \xfe\x01" * 4,
        b"\x16\x03\x01\xff\xff" + b"\x00" * 64,  # a handshake record header with a lie inside
    ],
    ids=["plain-http", "garbage", "bogus-record"],
)
def test_non_tls_bytes_are_closed_at_once_without_an_http_answer(
    https_server: ServerProcess, pki: Pki, payload: bytes
) -> None:
    with connect(https_server.tcp) as sock:
        sock.sendall(payload)
        elapsed, received = seconds_until_closed(sock)
    assert elapsed < PROMPT
    assert not received.startswith(b"HTTP/")  # at most a TLS alert record
    assert https_get(https_server, client_context(pki)) == b"pong"


def test_client_closing_mid_handshake_is_dropped_quietly(
    https_server: ServerProcess, pki: Pki
) -> None:
    hello = client_hello(pki)
    for _ in range(20):
        with connect(https_server.tcp) as sock:
            sock.sendall(hello[: len(hello) // 2])
    assert https_get(https_server, client_context(pki)) == b"pong"


def test_silent_and_trickling_clients_are_closed_by_header_timeout_while_others_are_served(
    https_server: ServerProcess, pki: Pki
) -> None:
    workers = https_server.workers()
    hello = client_hello(pki)
    silent = [connect(https_server.tcp) for _ in range(50)]  # connect, then say nothing
    halfway = connect(https_server.tcp)
    halfway.sendall(hello[:20])  # a ClientHello that never finishes
    trickle = connect(https_server.tcp)
    stop_trickling = threading.Event()

    def drip() -> None:
        # One byte every 0.3 s: never idle for long, yet the handshake never completes.
        for byte in hello:
            if stop_trickling.wait(0.3):
                return
            try:
                trickle.sendall(bytes([byte]))
            except OSError:
                return

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    try:
        # The stalled handshakes hold no worker: others get answers at once, on both workers.
        started = time.monotonic()
        for _ in range(20):
            assert https_get(https_server, client_context(pki)) == b"pong"
        assert time.monotonic() - started < PROMPT * 3
        for sock in [*silent[:3], halfway, trickle]:
            elapsed, received = seconds_until_closed(sock)
            assert received == b""
            assert elapsed < HEADER_TIMEOUT + 1.5, elapsed  # the sweeper runs every 0.25 s
        assert time.monotonic() - started >= HEADER_TIMEOUT - 0.5  # not closed too early
    finally:
        stop_trickling.set()
        dripper.join(5)
        for sock in [*silent, halfway, trickle]:
            sock.close()
    assert https_server.workers() == workers
    assert "Traceback" not in https_server.output()


def test_a_handshake_must_finish_within_header_timeout_even_when_idle_timeout_is_long(
    pki: Pki, tmp_path: Path
) -> None:
    with Launcher(tmp_path) as launcher:
        server = start(launcher, pki, "patient").wait_serving()  # idle_timeout=60
        hello = client_hello(pki)
        silent = connect(server.tcp)
        halfway = connect(server.tcp)
        halfway.sendall(hello[: len(hello) // 2])
        try:
            for sock in (silent, halfway):
                elapsed, received = seconds_until_closed(sock, limit=20.0)
                assert received == b""
                assert elapsed < HEADER_TIMEOUT + 5.0, elapsed  # far from the 60 s idle_timeout
        finally:
            silent.close()
            halfway.close()
        assert https_get(server, client_context(pki)) == b"pong"


def test_tls_connection_idle_after_a_request_is_closed_with_close_notify(
    https_server: ServerProcess, pki: Pki
) -> None:
    raw = connect(https_server.tcp, timeout=IDLE_TIMEOUT + 3)
    # Not suppressing ragged EOFs, recv() returns b"" only after a close_notify alert; a bare
    # TCP close raises SSLEOFError ("EOF occurred in violation of protocol").
    context = client_context(pki)
    with context.wrap_socket(raw, server_hostname="127.0.0.1", suppress_ragged_eofs=False) as sock:
        sock.sendall(b"GET /ping HTTP/1.1\r\nHost: test\r\n\r\n")
        assert sock.recv(4096).endswith(b"pong")
        started = time.monotonic()
        assert sock.recv(4096) == b""
        assert IDLE_TIMEOUT - 0.5 <= time.monotonic() - started < IDLE_TIMEOUT + 1.5
