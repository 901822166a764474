"""Request bodies over real sockets: read only when the app asks, refused from Content-Length,
413 mid-body, the unread rest drained or the connection closed.

The server is `tests.support.apps.basic:patient`: header and body deadlines of 30 s,
`max_body_size` 512 KiB (above the 256 KiB the server drains of a body the app left unread),
`request_timeout` 1 s, and `/limited` behind `body_limit(1000)`. A refusal that arrives while
the socket timeout of 10 s still runs did not wait for a deadline.
"""

from __future__ import annotations

import select
import socket
import struct
from collections.abc import Iterator

import pytest

from tests.support.raw_client import Reader, connect, get, request_bytes
from tests.support.serve import Launcher, ServerProcess

pytestmark = pytest.mark.timeout(60)

WAIT = 10.0  # far below the 30 s deadlines, far above any honest answer time


@pytest.fixture(scope="module")
def patient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`tests.support.apps.basic:patient` with one worker, shared by this module's tests."""
    with Launcher(tmp_path_factory.mktemp("patient")) as launcher:
        yield launcher("tests.support.apps.basic:patient")


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def refused_at_once(server: ServerProcess, raw: bytes) -> Reader:
    """Send `raw`; the first answer must be a 413 with Connection: close, then EOF."""
    sock = connect(server.address, timeout=WAIT)
    sock.sendall(raw)
    reader = Reader(sock)
    res = reader.read_response()
    assert (res.status, res.header("connection")) == (413, "close"), res
    assert reader.at_eof(WAIT)
    sock.close()
    return reader


@pytest.mark.parametrize("expect", [False, True])
def test_body_limit_refuses_from_content_length_before_any_body_byte(
    patient: ServerProcess, expect: bool
) -> None:
    # Only the head goes out, so a server that waited for the body (or sent 100 Continue
    # first) would fail the read above the 413.
    headers = [("Content-Length", "5000")] + ([("Expect", "100-continue")] if expect else [])
    refused_at_once(patient, request_bytes("POST", "/limited", headers))


def test_body_limit_refuses_a_large_expect_100_continue_body_without_a_100(
    patient: ServerProcess,
) -> None:
    headers = [("Content-Length", "300000"), ("Expect", "100-continue")]
    refused_at_once(patient, request_bytes("POST", "/limited", headers))


def test_body_limit_refusal_is_not_reset_by_the_body_the_client_keeps_sending(
    patient: ServerProcess,
) -> None:
    # The server answers before reading; lingering keeps the unread body from turning its
    # close into a reset that would destroy the 413 on the client's side.
    raw = request_bytes("POST", "/limited", body=b"x" * 60_000)
    refused_at_once(patient, raw)


def test_max_body_size_refuses_from_content_length_before_any_body_byte(
    patient: ServerProcess,
) -> None:
    headers = [("Content-Length", str(513 * 1024)), ("Expect", "100-continue")]
    refused_at_once(patient, request_bytes("POST", "/echo", headers))


@pytest.mark.parametrize(("target", "piece"), [("/limited", 600), ("/count", 300_000)])
def test_chunked_body_crossing_a_limit_gets_413_and_nothing_after_it_is_parsed(
    patient: ServerProcess, target: str, piece: int
) -> None:
    # The second piece crosses body_limit(1000) or max_body_size (512 KiB); what follows would
    # be a request of its own if the server went on parsing.
    smuggled = request_bytes("GET", "/pid")
    raw = request_bytes("POST", target, [("Transfer-Encoding", "chunked")])
    raw += b"%x\r\n%s\r\n" % (piece, b"a" * piece) * 2 + smuggled * 3
    reader = refused_at_once(patient, raw)
    assert b"HTTP/1.1" not in reader.buf
    log = patient.output()
    assert "between requests" not in log and "where a request should start" not in log
    assert "Traceback" not in log


def test_an_unread_body_sent_after_the_answer_is_drained_and_the_connection_kept(
    patient: ServerProcess,
) -> None:
    with connect(patient.address, timeout=WAIT) as sock:
        reader = Reader(sock)
        sock.sendall(request_bytes("POST", "/ignore", [("Content-Length", "5000")]))
        res = reader.read_response()  # answered before the body was sent
        assert (res.status, res.body, res.header("connection")) == (200, b"ignored", None)
        sock.sendall(b"b" * 5000 + request_bytes("GET", "/ping"))
        assert reader.read_response().body == b"pong"


@pytest.mark.parametrize(
    "body_headers",
    [
        (b"z" * 20_000, []),
        (chunked(b"z" * 20_000, b"y" * 30_000), [("Transfer-Encoding", "chunked")]),
    ],
    ids=["content-length", "chunked"],
)
def test_unread_bodies_pipelined_with_the_next_request_are_skipped(
    patient: ServerProcess, body_headers: tuple[bytes, list[tuple[str, str]]]
) -> None:
    body, headers = body_headers
    raw = request_bytes("POST", "/ignore", headers, body=body) + request_bytes("GET", "/ping")
    with connect(patient.address, timeout=WAIT) as sock:
        sock.sendall(raw)
        reader = Reader(sock)
        assert [reader.read_response().body for _ in range(2)] == [b"ignored", b"pong"]


def test_a_body_read_by_the_app_gets_100_continue_then_its_answer(
    patient: ServerProcess,
) -> None:
    head = request_bytes(
        "POST", "/count", [("Transfer-Encoding", "chunked"), ("Expect", "100-continue")]
    )
    with connect(patient.address, timeout=WAIT) as sock:
        sock.sendall(head)
        reader = Reader(sock)
        assert reader.read_head().status == 100
        sock.sendall(chunked(b"a" * 700, b"b" * 300))
        res = reader.read_response()
    assert (res.status, res.body, res.header("connection")) == (200, b"1000", None)


def test_an_unread_expect_100_continue_body_closes_the_connection(
    patient: ServerProcess,
) -> None:
    # No 100 went out, so the client may never send the body: waiting for it would hang.
    head = request_bytes("POST", "/ignore", [("Content-Length", "50"), ("Expect", "100-continue")])
    with connect(patient.address, timeout=WAIT) as sock:
        sock.sendall(head)
        reader = Reader(sock)
        res = reader.read_response()
        assert (res.status, res.body, res.header("connection")) == (200, b"ignored", "close")
        assert reader.at_eof(WAIT)


def test_an_unread_body_over_the_drain_budget_closes_the_connection_at_once(
    patient: ServerProcess,
) -> None:
    with connect(patient.address, timeout=WAIT) as sock:
        sock.sendall(request_bytes("POST", "/ignore", [("Content-Length", str(400_000))]))
        reader = Reader(sock)
        res = reader.read_response()
        assert (res.status, res.body, res.header("connection")) == (200, b"ignored", "close")
        assert reader.at_eof(WAIT)  # without waiting for 400 kB nobody wants


def test_client_closing_in_the_middle_of_a_body_nobody_reads_costs_nothing(
    patient: ServerProcess,
) -> None:
    pid = get(patient.address, "/pid").body
    with connect(patient.address, timeout=WAIT) as sock:
        sock.sendall(request_bytes("POST", "/ignore", [("Content-Length", "5000")]) + b"x" * 10)
        assert Reader(sock).read_response().body == b"ignored"
        sock.shutdown(socket.SHUT_WR)
    assert get(patient.address, "/pid").body == pid
    assert "Traceback" not in patient.output()


def test_absolute_form_target_authority_wins_over_the_host_header(
    patient: ServerProcess,
) -> None:
    with connect(patient.address, timeout=WAIT) as sock:
        sock.sendall(b"GET http://a:81/host HTTP/1.1\r\nHost: b\r\n\r\n")
        res = Reader(sock).read_response()
    assert (res.status, res.body) == (200, b"a:81")


@pytest.mark.parametrize(
    "unfinished",
    [b"GET /ping HTTP/1.1\rHost: t", b"GET /ping HTTP/1.1\r\nHost: t\r\nX-A: 1\r2"],
)
def test_bare_cr_in_an_unfinished_head_is_refused_at_once(
    patient: ServerProcess, unfinished: bytes
) -> None:
    with connect(patient.address, timeout=WAIT) as sock:
        sock.sendall(unfinished)  # the head never ends: only the CR can be refused
        reader = Reader(sock)
        res = reader.read_response()
        assert (res.status, res.header("connection")) == (400, "close")
        assert res.body.startswith(b"Bad Request: Bare CR")
        assert reader.at_eof(WAIT)


def test_client_resetting_in_the_middle_of_a_body_being_read_logs_nothing(
    patient: ServerProcess,
) -> None:
    sock = connect(patient.address, timeout=WAIT)
    sock.sendall(request_bytes("POST", "/count", [("Content-Length", "5000")]) + b"x" * 10)
    assert select.select([sock], [], [], 0.5)[0] == []  # the app is waiting for the rest
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()  # a reset, not a clean close
    for _ in range(3):
        assert get(patient.address, "/ping").body == b"pong"
    assert "Traceback" not in patient.output()


def test_waiting_for_the_body_does_not_count_against_request_timeout(
    patient: ServerProcess,
) -> None:
    # The handler sleeps 0.3 s, reads a body the client sends 2 s after the head, and sleeps
    # 0.3 s again: over 2 s of wall clock, 0.6 s of its own (request_timeout is 1 s).
    with connect(patient.address, timeout=WAIT) as sock:
        head = request_bytes("POST", "/sleep-around-count?s=0.3", [("Content-Length", "5")])
        sock.sendall(head)
        assert select.select([sock], [], [], 2.0)[0] == []
        sock.sendall(b"12345")
        res = Reader(sock).read_response()
    assert (res.status, res.body) == (200, b"5")
