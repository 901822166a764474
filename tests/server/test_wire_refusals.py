"""Every parser refusal over a real socket: right status, `Connection: close`, the socket is
closed after the answer, and the same worker keeps serving."""

from __future__ import annotations

import pytest

from tests.support.raw_client import Reader, connect, get, request_bytes
from tests.support.serve import ServerProcess

pytestmark = pytest.mark.timeout(60)

BAD_REQUESTS = {
    "bad request line": (b"GARBAGE\r\nHost: t\r\n\r\n", 400, b"Bad Request: "),
    "method not a token": (b"BR(EW /ping HTTP/1.1\r\nHost: t\r\n\r\n", 400, b"Bad Request: "),
    "bare LF in the head": (b"GET /ping HTTP/1.1\nHost: t\n\n", 400, b"Bad Request: Bare LF"),
    "Host not an authority": (b"GET /ping HTTP/1.1\r\nHost: a b\r\n\r\n", 400, b"Bad Request: "),
    "HTTP/2.0": (b"GET /ping HTTP/2.0\r\nHost: t\r\n\r\n", 505, b"HTTP Version Not Supported: "),
    "huge header": (
        b"GET /ping HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n",
        431,
        b"Request Header Fields Too Large: ",
    ),
    "huge target": (
        b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: t\r\n\r\n",
        414,
        b"URI Too Long: ",
    ),
    "CL and TE": (
        b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
        b"Bad Request: ",
    ),
    "obs-fold": (
        b"GET /ping HTTP/1.1\r\nHost: t\r\nX-A: one\r\n  folded\r\n\r\n",
        400,
        b"Bad Request: ",
    ),
    "bare CR": (b"GET /ping HTTP/1.1\r\nHost: t\rX-A: b\r\n\r\n", 400, b"Bad Request: "),
    "missing Host": (b"GET /ping HTTP/1.1\r\nX-A: b\r\n\r\n", 400, b"Bad Request: "),
    "two Hosts": (b"GET /ping HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, b"Bad Request: "),
    "bad chunk size": (
        b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        400,
        b"Bad Request: ",
    ),
    "bare LF after a chunk size": (
        b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n",
        400,
        b"Bad Request: Bare LF",
    ),
    "bare LF after chunk data, body unread": (
        b"POST /ignore HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\nabc\n0\r\n\r\n",
        400,
        b"Bad Request: Bare LF",
    ),
    "bare LF in trailers": (
        b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: 1\n\r\n",
        400,
        b"Bad Request: Bare LF",
    ),
    "bare-LF chunked smuggling": (
        b"POST /echo HTTP/1.1\nHost: t\nTransfer-Encoding: chunked\n\n3;x=y\nabc\n0\n\n",
        400,
        b"Bad Request: Bare LF",
    ),
    "bad chunk extension": (
        b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3;a=b c\r\nabc\r\n",
        400,
        b"Bad Request: Malformed chunk extension",
    ),
    "absolute form with userinfo": (
        b"GET http://u@t/ping HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
        b"Bad Request: ",
    ),
    "unknown expectation": (
        b"POST /echo HTTP/1.1\r\nHost: t\r\nExpect: teapot\r\nContent-Length: 1\r\n\r\nx",
        417,
        b"Expectation Failed: ",
    ),
    "TE gzip": (
        b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        501,
        b"Not Implemented: ",
    ),
}


@pytest.fixture(scope="module")
def worker_pid(basic_server: ServerProcess) -> str:
    """The pid of the single worker, before any refusal."""
    return get(basic_server.address, "/pid").body.decode()


def _refused_then_closed(server: ServerProcess, raw: bytes) -> tuple[int, bytes, str | None]:
    with connect(server.address) as sock:
        sock.sendall(raw)
        reader = Reader(sock)
        res = reader.read_response()
        assert reader.at_eof(), "the connection must close after a refusal"
    return res.status, res.body, res.header("connection")


@pytest.mark.parametrize("case", list(BAD_REQUESTS))
def test_refused_request_gets_its_status_and_close_and_the_worker_survives(
    basic_server: ServerProcess, worker_pid: str, case: str
) -> None:
    raw, status, body_start = BAD_REQUESTS[case]
    got_status, body, connection = _refused_then_closed(basic_server, raw)
    assert (got_status, connection) == (status, "close")
    assert body.startswith(body_start) and body.endswith(b"\n")
    assert get(basic_server.address, "/pid").body.decode() == worker_pid


def test_content_length_over_max_body_size_gets_413_before_the_body_is_sent(
    basic_server: ServerProcess, worker_pid: str
) -> None:
    head = request_bytes("POST", "/echo", [("Content-Length", str(10 * 1024 * 1024))])
    # Only the head goes out: if the server waited for the body this read would time out.
    status, body, connection = _refused_then_closed(basic_server, head)
    assert (status, body, connection) == (413, b"Payload Too Large: Body too large\n", "close")
    assert get(basic_server.address, "/pid").body.decode() == worker_pid


def test_expect_100_continue_with_too_large_a_body_gets_413_and_no_100(
    basic_server: ServerProcess,
) -> None:
    head = request_bytes(
        "POST", "/echo", [("Content-Length", str(10 * 1024 * 1024)), ("Expect", "100-continue")]
    )
    status, _, connection = _refused_then_closed(basic_server, head)
    assert (status, connection) == (413, "close")  # the first response is the 413, not a 100


def test_chunked_body_growing_past_max_body_size_gets_413(basic_server: ServerProcess) -> None:
    chunk = b"%x\r\n%s\r\n" % (40_000, b"c" * 40_000)
    raw = request_bytes("POST", "/echo", [("Transfer-Encoding", "chunked")]) + chunk * 2
    status, _, connection = _refused_then_closed(basic_server, raw)
    assert (status, connection) == (413, "close")


def test_request_pipelined_after_a_refused_one_is_never_answered(
    basic_server: ServerProcess,
) -> None:
    smuggled = (
        b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n"
        b"\r\n0\r\n\r\n" + request_bytes("GET", "/pid")
    )
    with connect(basic_server.address) as sock:
        sock.sendall(smuggled)
        reader = Reader(sock)
        assert reader.read_response().status == 400
        assert reader.at_eof()  # the GET after it was discarded, not served


def test_refusal_after_good_requests_on_the_same_connection_answers_them_first(
    basic_server: ServerProcess,
) -> None:
    with connect(basic_server.address) as sock:
        sock.sendall(request_bytes("GET", "/ping") * 2 + b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n")
        reader = Reader(sock)
        statuses = [reader.read_response().status for _ in range(3)]
        assert statuses == [200, 200, 400]
        assert reader.at_eof()
