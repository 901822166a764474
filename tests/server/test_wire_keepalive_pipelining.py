"""Connection reuse over real sockets: keep-alive, pipelining, Expect: 100-continue, half-close,
handler errors; a client that half-closes still gets every response it asked for."""

from __future__ import annotations

import http.client
import socket

import pytest

from tests.support.raw_client import Reader, connect, get, request_bytes
from tests.support.serve import ServerProcess

pytestmark = pytest.mark.timeout(60)


def test_many_requests_share_one_keep_alive_connection(basic_server: ServerProcess) -> None:
    host, port = basic_server.tcp
    conn = http.client.HTTPConnection(host, port, timeout=5)
    try:
        conn.connect()
        local = conn.sock.getsockname()
        for _ in range(50):
            conn.request("GET", "/ping")
            res = conn.getresponse()
            assert res.status == 200
            assert res.getheader("Connection") is None  # HTTP/1.1 keeps it unsaid
            assert res.read() == b"pong"
        assert conn.sock is not None and conn.sock.getsockname() == local  # never reconnected
    finally:
        conn.close()


def test_http10_request_gets_connection_close_and_the_socket_closes(
    basic_server: ServerProcess,
) -> None:
    with connect(basic_server.address) as sock:
        sock.sendall(request_bytes("GET", "/ping", version="HTTP/1.0", host=False))
        reader = Reader(sock)
        res = reader.read_response()
        assert (res.status, res.body) == (200, b"pong")
        assert res.header("connection") == "close"
        assert reader.at_eof()


def test_http10_keep_alive_request_keeps_the_connection(basic_server: ServerProcess) -> None:
    with connect(basic_server.address) as sock:
        reader = Reader(sock)
        for _ in range(3):
            sock.sendall(
                request_bytes("GET", "/ping", [("Connection", "keep-alive")], version="HTTP/1.0")
            )
            res = reader.read_response()
            assert (res.status, res.header("connection")) == (200, "keep-alive")


def test_connection_close_request_is_answered_then_closed(basic_server: ServerProcess) -> None:
    with connect(basic_server.address) as sock:
        sock.sendall(request_bytes("GET", "/ping", [("Connection", "close")]))
        reader = Reader(sock)
        res = reader.read_response()
        assert (res.status, res.body, res.header("connection")) == (200, b"pong", "close")
        assert reader.at_eof()


def test_twenty_pipelined_requests_in_one_send_get_twenty_ordered_responses(
    basic_server: ServerProcess,
) -> None:
    batch = b"".join(
        request_bytes("POST", f"/echo?n={i}", body=f"body-{i}".encode()) for i in range(20)
    )
    with connect(basic_server.address) as sock:
        sock.sendall(batch)
        reader = Reader(sock)
        bodies = [reader.read_response().body for _ in range(20)]
    assert bodies == [f"body-{i}".encode() for i in range(20)]


def test_mixed_pipeline_of_gets_posts_and_a_chunked_body_keeps_order(
    basic_server: ServerProcess,
) -> None:
    chunked = request_bytes(
        "POST",
        "/echo",
        [("Transfer-Encoding", "chunked")],
        body=b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
    )
    batch = b"".join(
        [
            request_bytes("GET", "/ping"),
            request_bytes("POST", "/echo", body=b"x" * 3000),
            chunked,
            request_bytes("GET", "/nope"),
            request_bytes("PUT", "/echo", body=b"put!"),
            request_bytes("HEAD", "/ping"),
            request_bytes("GET", "/ping"),
        ]
    )
    with connect(basic_server.address) as sock:
        # Split mid-request so the server must resume a pipelined head across reads.
        sock.sendall(batch[:1500])
        sock.sendall(batch[1500:])
        reader = Reader(sock)
        got = [reader.read_response() for _ in range(5)]
        head = reader.read_response(head_request=True)
        last = reader.read_response()
    assert [(r.status, r.body) for r in got] == [
        (200, b"pong"),
        (200, b"x" * 3000),
        (200, b"abcde"),
        (404, b"Not Found\n"),
        (200, b"put!"),
    ]
    assert got[4].header("x-method") == "PUT"
    assert (head.status, head.header("content-length"), head.body) == (200, "4", b"")
    assert (last.status, last.body) == (200, b"pong")


def test_expect_100_continue_gets_the_interim_response_before_the_body_is_sent(
    basic_server: ServerProcess,
) -> None:
    head = request_bytes("POST", "/echo", [("Content-Length", "5"), ("Expect", "100-continue")])
    with connect(basic_server.address, timeout=3) as sock:
        sock.sendall(head)
        reader = Reader(sock)
        interim = reader.read_head()  # times out if the server waits for the body first
        assert (interim.status, interim.reason) == (100, "Continue")
        sock.sendall(b"hello")
        final = reader.read_response()
    assert (final.status, final.body) == (200, b"hello")


def test_no_100_continue_when_the_body_arrives_with_the_head(basic_server: ServerProcess) -> None:
    request = request_bytes("POST", "/echo", [("Expect", "100-continue")], body=b"hello")
    with connect(basic_server.address) as sock:
        sock.sendall(request + request_bytes("GET", "/ping"))
        reader = Reader(sock)
        first = reader.read_response()
        second = reader.read_response()
    assert (first.status, first.body) == (200, b"hello")  # not a 100
    assert (second.status, second.body) == (200, b"pong")


def test_request_then_shutdown_write_side_still_gets_the_full_response(
    basic_server: ServerProcess,
) -> None:
    with connect(basic_server.address) as sock:
        sock.sendall(request_bytes("POST", "/echo", body=b"z" * 50_000))
        sock.shutdown(socket.SHUT_WR)
        reader = Reader(sock)
        res = reader.read_response()
        assert (res.status, len(res.body), res.complete) == (200, 50_000, True)
        assert reader.at_eof()  # and then the server closes its side too


def test_pipelined_requests_before_half_close_are_all_answered(
    basic_server: ServerProcess,
) -> None:
    with connect(basic_server.address) as sock:
        sock.sendall(request_bytes("GET", "/ping") * 3)
        sock.shutdown(socket.SHUT_WR)
        reader = Reader(sock)
        assert [reader.read_response().body for _ in range(3)] == [b"pong"] * 3
        assert reader.at_eof()


def test_handler_exception_gives_generic_500_and_the_connection_stays_usable(
    basic_server: ServerProcess,
) -> None:
    with connect(basic_server.address) as sock:
        reader = Reader(sock)
        sock.sendall(request_bytes("GET", "/boom"))
        res = reader.read_response()
        assert (res.status, res.body) == (500, b"Internal Server Error\n")
        assert res.header("connection") is None  # not "close": the connection stays
        assert res.header("x-before") == "kept"  # headers set before the exception stay
        sock.sendall(request_bytes("GET", "/ping"))
        again = reader.read_response()
        assert (again.status, again.body) == (200, b"pong")
    assert "secret detail that must not leak" in basic_server.output()  # logged, not sent


@pytest.mark.parametrize("target", ["/escaped-timeout", "/exit"])
def test_handler_raising_a_base_exception_gets_500_and_the_worker_survives(
    basic_server: ServerProcess, target: str
) -> None:
    # gevent.Timeout and SystemExit are BaseExceptions: escaping into the hub they would end
    # the worker process, and with it every other connection it serves.
    pid = get(basic_server.address, "/pid").body
    with connect(basic_server.address) as other:  # a bystander connection on the same worker
        other.sendall(request_bytes("GET", "/ping"))
        other_reader = Reader(other)
        assert other_reader.read_response().body == b"pong"
        with connect(basic_server.address) as sock:
            sock.sendall(request_bytes("GET", target))
            reader = Reader(sock)
            res = reader.read_response()
            assert (res.status, res.body) == (500, b"Internal Server Error\n")
            assert reader.at_eof()
        other.sendall(request_bytes("GET", "/ping"))
        assert other_reader.read_response().body == b"pong"
    assert get(basic_server.address, "/pid").body == pid
