"""`ServerConnection`: the framing, keep-alive and interim answers it decides, byte by byte."""

from __future__ import annotations

import re

import pytest

from socketify.protocol.http11 import (
    END_OF_MESSAGE,
    LocalProtocolError,
    RequestHead,
    ServerConnection,
    header_field,
    trailer_field,
)

DATE = re.compile(rb"Date: [A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT\r\n")
JSON = header_field("Content-Type", "application/json")


def request(raw: bytes) -> tuple[ServerConnection, RequestHead]:
    conn = ServerConnection()
    conn.receive_data(raw)
    head = conn.next_event()
    assert isinstance(head, RequestHead)
    return conn, head


def without_date(data: bytes) -> bytes:
    assert len(DATE.findall(data)) == 1
    return DATE.sub(b"", data)


def test_a_buffered_answer_is_the_head_then_the_body_and_keeps_the_connection() -> None:
    conn, head = request(b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n")
    data = conn.respond(head, 200, (JSON,), b'{"ok":true}')
    assert without_date(data) == (
        b"HTTP/1.1 200 OK\r\nServer: socketify\r\nContent-Type: application/json\r\n"
        b"Content-Length: 11\r\n\r\n"
        b'{"ok":true}'
    )
    assert conn.keep_alive
    assert conn.next_event() is END_OF_MESSAGE


@pytest.mark.parametrize("status", [100, 204, 304])
def test_bodiless_statuses_send_no_body_and_no_length(status: int) -> None:
    conn, head = request(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    data = conn.respond(head, status, (), b"ignored")
    assert b"Content-Length" not in data and data.endswith(b"\r\n\r\n")


def test_head_gets_the_get_headers_and_no_body() -> None:
    conn, head = request(b"HEAD / HTTP/1.1\r\nHost: h\r\n\r\n")
    data = conn.respond(head, 200, (), b"hello")
    assert b"Content-Length: 5\r\n" in data and data.endswith(b"\r\n\r\n")
    conn, head = request(b"HEAD / HTTP/1.1\r\nHost: h\r\n\r\n")
    conn.start_response(head, 200, (), length=None)
    assert not conn.sends_body and conn.send_data(b"chunk") == b""
    assert conn.end_response() == b""


def test_a_stream_is_chunked_on_http11_and_ends_with_the_close_on_http10() -> None:
    conn, head = request(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    data = conn.start_response(head, 200, (), length=None)
    assert b"Transfer-Encoding: chunked\r\n" in data
    assert conn.send_data(b"abc") == b"3\r\nabc\r\n" and conn.send_data(b"") == b""
    assert conn.end_response() == b"0\r\n\r\n" and conn.keep_alive
    conn, head = request(b"GET / HTTP/1.0\r\n\r\n")
    data = conn.start_response(head, 200, (), length=None)
    assert b"Transfer-Encoding" not in data and b"Connection: close\r\n" in data
    assert conn.send_data(b"abc") == b"abc"
    assert conn.end_response() == b"" and not conn.keep_alive


def test_keep_alive_follows_the_request_the_answer_and_the_owner() -> None:
    conn, head = request(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    assert b"Connection: close\r\n" in conn.respond(head, 200, (), b"")
    assert not conn.keep_alive
    conn, head = request(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    close = header_field("Connection", "close")
    data = conn.respond(head, 200, (close,), b"")
    assert data.count(b"Connection:") == 1 and b"Connection: close\r\n" in data
    assert not conn.keep_alive
    conn, head = request(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    assert b"Connection: close\r\n" in conn.respond(head, 200, (), b"", keep_alive=False)
    conn, head = request(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    assert b"Connection: keep-alive\r\n" in conn.respond(head, 200, (), b"")


def test_an_upgrade_sends_its_own_connection_field_and_no_framing() -> None:
    conn, head = request(b"GET /ws HTTP/1.1\r\nHost: h\r\n\r\n")
    fields = (header_field("Upgrade", "websocket"), header_field("Connection", "Upgrade"))
    data = conn.start_response(head, 101, fields, length=None, upgrade=True)
    assert b"Connection: Upgrade\r\n" in data and b"Content-Length" not in data
    assert b"Transfer-Encoding" not in data and not conn.keep_alive


def test_the_answers_own_date_and_server_replace_ours() -> None:
    conn, head = request(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    server = header_field("Server", "mine")
    data = conn.respond(head, 200, (server,), b"")
    assert data.count(b"Server:") == 1 and b"Server: mine\r\n" in data and b"Date: " in data
    conn, head = request(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    date = header_field("Date", "Thu, 01 Jan 2026 00:00:00 GMT")
    data = conn.respond(head, 200, (date,), b"")
    assert data.count(b"Date:") == 1 and b"Server: socketify\r\n" in data


def test_framing_fields_are_the_connections_alone() -> None:
    conn, head = request(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    with pytest.raises(LocalProtocolError, match="Content-Length"):
        conn.respond(head, 200, (header_field("Content-Length", "3"),), b"abc")


def test_an_answer_must_end_before_the_next_starts() -> None:
    conn, head = request(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    conn.start_response(head, 200, (), length=None)
    with pytest.raises(LocalProtocolError):
        conn.respond(head, 200, (), b"")
    with pytest.raises(LocalProtocolError):
        ServerConnection().send_data(b"x")


def test_100_continue_goes_out_once_and_only_when_asked_for() -> None:
    conn, head = request(
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n"
    )
    assert conn.continue_response(head) == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert conn.continue_response(head) == b"" and conn.continued
    plain, head = request(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\n")
    assert plain.continue_response(head) == b"" and not plain.continued


def test_a_refusal_is_a_closing_answer_that_names_the_problem() -> None:
    conn = ServerConnection()
    data = conn.refuse(400, "Bare CR in request head")
    assert data.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b"Connection: close\r\n" in data and data.endswith(b"Bare CR in request head\n")
    assert not conn.keep_alive


def test_repeated_answers_are_the_same_bytes_within_their_date_second() -> None:
    first, head = request(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    second, other = request(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    a = first.respond(head, 200, (JSON,), b"{}")
    b = second.respond(other, 200, (JSON,), b"{}")
    assert without_date(a) == without_date(b)


def test_trailers_end_a_chunked_answer_and_nothing_else() -> None:
    trailers = (trailer_field("X-Digest", "abc"), trailer_field("Grpc-Status", "0"))
    conn, head = request(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    conn.start_response(head, 200, (), length=None)
    assert conn.sends_trailers
    assert conn.end_response(trailers) == b"0\r\nX-Digest: abc\r\nGrpc-Status: 0\r\n\r\n"
    assert conn.keep_alive
    # A length-framed answer, an HTTP/1.0 one and a HEAD answer have no place for them.
    for raw, length in (
        (b"GET / HTTP/1.1\r\nHost: h\r\n\r\n", 3),
        (b"GET / HTTP/1.0\r\n\r\n", None),
        (b"HEAD / HTTP/1.1\r\nHost: h\r\n\r\n", None),
    ):
        conn, head = request(raw)
        conn.start_response(head, 200, (), length=length)
        assert not conn.sends_trailers
        assert conn.end_response(trailers) == b""


def test_the_connection_hands_over_a_requests_trailers() -> None:
    conn, _head = request(
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"2\r\nhi\r\n0\r\nX-Sum: 2\r\nContent-Length: 9\r\n\r\n"
    )
    assert conn.next_event() == b"hi"
    assert conn.next_event() is END_OF_MESSAGE
    assert conn.trailers == (("x-sum", "2"),)


@pytest.mark.parametrize(
    "name",
    ["Content-Length", "transfer-encoding", "Trailer", "Host", "Authorization", "Set-Cookie",
     "Content-Type", "Content-Encoding", "Cache-Control", "TE", "Connection", "Date"],
)  # fmt: skip
def test_fields_no_trailer_may_carry_are_refused_as_response_trailers(name: str) -> None:
    with pytest.raises(ValueError, match="must not be sent as a trailer"):
        trailer_field(name, "x")


@pytest.mark.parametrize(("name", "value"), [("X A", "1"), ("X-A", "a\r\nInjected: 1"), ("", "1")])
def test_invalid_response_trailer_fields_are_refused(name: str, value: str) -> None:
    with pytest.raises(ValueError):
        trailer_field(name, value)


def test_digests_and_other_fields_may_be_response_trailers() -> None:
    for name in ("Content-Digest", "Repr-Digest", "Grpc-Status", "Server-Timing", "X-Anything"):
        assert trailer_field(name, "v")[0] == name.lower()
