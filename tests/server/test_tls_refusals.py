"""Refusals over TLS take the same path as over plain HTTP: the error answer is encrypted,
arrives whole (the half-close and drain do not reset it), and ends with close_notify."""

from __future__ import annotations

import socket
import ssl
import time

import pytest

from tests.server.tls_clients import client_context
from tests.support.pki import Pki
from tests.support.raw_client import Reader, request_bytes
from tests.support.serve import ServerProcess

pytestmark = pytest.mark.timeout(60)

HEADER_TIMEOUT = 1.0  # tls_app's header_timeout


def strict_tls(server: ServerProcess, pki: Pki) -> ssl.SSLSocket:
    """A TLS client that raises on a close without close_notify."""
    raw = socket.create_connection(server.tcp, timeout=5)
    return client_context(pki).wrap_socket(
        raw, server_hostname="127.0.0.1", suppress_ragged_eofs=False
    )


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GARBAGE\r\nHost: t\r\n\r\n", 400),
        (b"GET /ping HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n", 431),
        (b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ],
    ids=["bad-request-line", "huge-header", "cl-and-te"],
)  # fmt: skip
def test_malformed_request_over_tls_gets_its_status_then_close_notify(
    https_server: ServerProcess, pki: Pki, raw: bytes, status: int
) -> None:
    with strict_tls(https_server, pki) as sock:
        sock.sendall(raw)
        reader = Reader(sock)
        res = reader.read_response()
        assert (res.status, res.header("connection")) == (status, "close")
        assert reader.at_eof()  # b"" only after close_notify with suppress_ragged_eofs off


def test_slow_head_over_tls_is_cut_with_408_a_header_timeout_after_its_first_byte(
    https_server: ServerProcess, pki: Pki
) -> None:
    with strict_tls(https_server, pki) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /ping HTTP/1.1\r\nHost: t\r\n")  # and never the blank line
        reader = Reader(sock)
        res = reader.read_response()
        elapsed = time.monotonic() - started
        assert (res.status, res.header("connection")) == (408, "close")
        assert reader.at_eof()
    assert HEADER_TIMEOUT - 0.1 <= elapsed <= HEADER_TIMEOUT + 1.0


def test_request_after_a_refusal_on_another_connection_is_served(
    https_server: ServerProcess, pki: Pki
) -> None:
    with strict_tls(https_server, pki) as bad:
        bad.sendall(b"GARBAGE\r\n\r\n")
        with strict_tls(https_server, pki) as good:
            good.sendall(request_bytes("GET", "/ping"))
            assert Reader(good).read_response().body == b"pong"
        assert Reader(bad).read_response().status == 400
