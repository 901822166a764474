"""Phase deadlines over real sockets, counted for the whole phase rather than reset by every
byte that arrives (so a slow trickle cannot hold a connection): the app under test runs with
header_timeout=1, body_timeout=1, idle_timeout=2, request_timeout=1; the sweeper ticks every
0.25 s, so each deadline is checked with about half a second of slack either way."""

from __future__ import annotations

import select
import socket
import time

import pytest

from tests.support.raw_client import Reader, connect, get, request_bytes
from tests.support.serve import ServerProcess

pytestmark = pytest.mark.timeout(60)

HEADER_TIMEOUT = BODY_TIMEOUT = REQUEST_TIMEOUT = 1.0
IDLE_TIMEOUT = 2.0
SLACK = 0.75


def _trickle_until_answered(sock: socket.socket, data: bytes, gap: float, give_up: float) -> float:
    """Send `data` one byte every `gap` seconds until the server answers; returns when it did,
    in seconds after the first byte. Fails if the whole of `data` went out unanswered."""
    start = time.monotonic()
    for byte in data:
        try:
            sock.send(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            break
        readable, _, _ = select.select([sock], [], [], gap)
        if readable:
            break
        if time.monotonic() - start > give_up:
            pytest.fail(f"still not cut off {give_up}s after the first byte")
    else:
        pytest.fail("the whole request was trickled without the server cutting it off")
    select.select([sock], [], [], give_up)
    return time.monotonic() - start


def test_slowloris_head_is_cut_with_408_a_header_timeout_after_its_first_byte(
    basic_server: ServerProcess,
) -> None:
    head = b"GET /ping HTTP/1.1\r\nHost: t\r\n" + b"X-Slow: " + b"s" * 200 + b"\r\n\r\n"
    with connect(basic_server.address) as sock:
        # One byte every 0.3 s: an inactivity timer would be reset forever.
        elapsed = _trickle_until_answered(sock, head, gap=0.3, give_up=6)
        reader = Reader(sock)
        res = reader.read_response()
        assert (res.status, res.body, res.header("connection")) == (
            408,
            b"Request Timeout\n",
            "close",
        )
        assert reader.at_eof()
    assert HEADER_TIMEOUT - 0.1 <= elapsed <= HEADER_TIMEOUT + SLACK


def test_trickled_body_is_cut_with_408_a_body_timeout_after_the_head(
    basic_server: ServerProcess,
) -> None:
    with connect(basic_server.address) as sock:
        sock.sendall(request_bytes("POST", "/echo", [("Content-Length", "200")]))
        elapsed = _trickle_until_answered(sock, b"b" * 200, gap=0.3, give_up=6)
        reader = Reader(sock)
        res = reader.read_response()
        assert (res.status, res.header("connection")) == (408, "close")
        assert reader.at_eof()
    assert BODY_TIMEOUT - 0.1 <= elapsed <= BODY_TIMEOUT + SLACK


def test_idle_keep_alive_connection_is_closed_silently_after_idle_timeout(
    basic_server: ServerProcess,
) -> None:
    with connect(basic_server.address, timeout=IDLE_TIMEOUT + 3) as sock:
        sock.sendall(request_bytes("GET", "/ping"))
        reader = Reader(sock)
        assert reader.read_response().status == 200
        start = time.monotonic()
        assert sock.recv(1024) == b""  # EOF, and no 408 before it
        elapsed = time.monotonic() - start
    assert IDLE_TIMEOUT - 0.1 <= elapsed <= IDLE_TIMEOUT + SLACK


def test_connection_that_sends_nothing_is_closed_silently_after_idle_timeout(
    basic_server: ServerProcess,
) -> None:
    start = time.monotonic()
    with connect(basic_server.address, timeout=IDLE_TIMEOUT + 3) as sock:
        assert sock.recv(1024) == b""
        elapsed = time.monotonic() - start
    assert IDLE_TIMEOUT - 0.1 <= elapsed <= IDLE_TIMEOUT + SLACK


def test_partial_head_after_a_long_idle_still_gets_the_full_header_timeout(
    basic_server: ServerProcess,
) -> None:
    # The idle deadline must not leak into the head phase: a client that waited 1.5 s (idle
    # allows 2) and then starts a request has a fresh header_timeout for it.
    with connect(basic_server.address) as sock:
        time.sleep(1.5)
        sock.sendall(b"GET /ping HTTP/1.1\r\n")
        time.sleep(0.6)  # past the idle deadline, inside the head deadline
        sock.sendall(b"Host: t\r\n\r\n")
        res = Reader(sock).read_response()
    assert (res.status, res.body) == (200, b"pong")


def test_handler_sleeping_past_request_timeout_gets_503_and_the_worker_keeps_serving(
    basic_server: ServerProcess,
) -> None:
    pid_before = get(basic_server.address, "/pid").body
    with connect(basic_server.address) as sock:
        start = time.monotonic()
        sock.sendall(request_bytes("GET", "/sleep?s=3"))
        reader = Reader(sock)
        res = reader.read_response()
        elapsed = time.monotonic() - start
        assert (res.status, res.header("connection")) == (503, "close")
        assert reader.at_eof()
    assert REQUEST_TIMEOUT - 0.1 <= elapsed <= REQUEST_TIMEOUT + SLACK
    assert get(basic_server.address, "/pid").body == pid_before
    assert get(basic_server.address, "/sleep?s=0.2").status == 200  # short ones still fine
