"""Trailers and the body deadline through the real `socketify run`, over HTTP/1.1 and h2c.

Request trailers reach `req.trailers` from a chunked HTTP/1.1 body (raw sockets) and from an
HTTP/2 stream (a raw h2 client), with the same fields dropped on both; response trailers set
with `res.set_trailer` reach curl, nghttp's h2 stack and the raw clients. A client that
trickles a body slower than `body_timeout` allows for the whole of it is cut off on HTTP/2 as
on HTTP/1.1, and only its own stream suffers.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest
from hyperframe.frame import DataFrame

from tests.server.trailers_app import BODY_TIMEOUT
from tests.support.raw_client import Reader, connect, request_bytes
from tests.support.raw_h2 import ErrorCode, FrameType, H2Client
from tests.support.serve import Launcher, ServerProcess

pytestmark = pytest.mark.timeout(60)

APP = "tests.server.trailers_app:server"
SLACK = 1.0  # how late a deadline may fire on a busy 2-core machine
# Sent by the client after its body: the allowed one reaches the handler, the others (a
# framing, a routing and a content field) must not be taken from a trailer.
SENT_TRAILERS = [("x-checksum", "abc123"), ("content-type", "text/evil"), ("host", "evil")]
KEPT_TRAILERS = {"x-checksum": "abc123"}
needs_curl = pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with Launcher(tmp_path_factory.mktemp("trailers")) as launch:
        yield launch(APP)


def chunked_request(target: str, body: bytes, trailers: list[tuple[str, str]]) -> bytes:
    head = request_bytes("POST", target, [("Transfer-Encoding", "chunked")])
    section = "".join(f"{name}: {value}\r\n" for name, value in trailers).encode()
    return head + b"%x\r\n%s\r\n0\r\n%s\r\n" % (len(body), body, section)


def digest_of(count: int) -> str:
    return hashlib.sha256(b"".join(f"chunk {n};".encode() for n in range(count))).hexdigest()


# -- request trailers ------------------------------------------------------------------------


def test_http11_chunked_request_trailers_reach_the_handler(server: ServerProcess) -> None:
    with connect(server.tcp) as sock:
        sock.sendall(chunked_request("/echo", b"hello", SENT_TRAILERS))
        reader = Reader(sock)
        res = reader.read_response()
        assert res.status == 200
        assert json.loads(res.body) == {"size": 5, "trailers": KEPT_TRAILERS}
        # The connection goes on: the trailer section was framed as it should be.
        sock.sendall(request_bytes("GET", "/ping"))
        assert reader.read_response().body == b"pong"


def test_http11_trailers_asked_for_before_the_body_ends_are_an_error(
    server: ServerProcess,
) -> None:
    head = request_bytes("POST", "/streamed-echo", [("Transfer-Encoding", "chunked")])
    body = b"3\r\nabc\r\n3\r\ndef\r\n0\r\nx-checksum: abc123\r\n\r\n"
    with connect(server.tcp) as sock:
        sock.sendall(head)
        sock.sendall(body[:8])  # the first chunk only: the handler reads it, then asks
        time.sleep(0.1)
        sock.sendall(body[8:])
        answer = json.loads(Reader(sock).read_response().body)
    assert answer["size"] == 6
    assert "read req.body, or iter_body() to its end" in answer["early"]["error"]
    assert answer["trailers"] == KEPT_TRAILERS


def test_http11_oversized_trailer_section_is_refused_with_431(server: ServerProcess) -> None:
    trailers = [(f"x-t{n}", "v" * 1000) for n in range(20)]  # over max_header_size (16 KiB)
    with connect(server.tcp) as sock:
        sock.sendall(chunked_request("/echo", b"hello", trailers))
        res = Reader(sock).read_response()
    assert res.status == 431
    with connect(server.tcp) as sock:  # and the worker serves on
        sock.sendall(request_bytes("GET", "/ping"))
        assert Reader(sock).read_response().body == b"pong"


def test_h2_request_trailers_reach_the_handler(server: ServerProcess) -> None:
    with H2Client.connect(server.tcp) as client:
        client.handshake()
        stream_id = client.new_stream()
        client.send_headers(stream_id, client.request_headers("POST", "/echo"), end_stream=False)
        client.send_data(stream_id, b"hello", end_stream=False)
        client.send_headers(stream_id, SENT_TRAILERS)
        res = client.response(stream_id)
        assert res.status == 200, client.exchange()
        assert json.loads(res.body) == {"size": 5, "trailers": KEPT_TRAILERS}


def test_h2_trailers_with_no_data_before_them_are_kept(server: ServerProcess) -> None:
    with H2Client.connect(server.tcp) as client:
        client.handshake()
        stream_id = client.new_stream()
        client.send_headers(stream_id, client.request_headers("POST", "/echo"), end_stream=False)
        client.send_headers(stream_id, [("x-checksum", "abc123")])
        res = client.response(stream_id)
        assert json.loads(res.body) == {"size": 0, "trailers": KEPT_TRAILERS}, client.exchange()


def test_h2_trailers_asked_for_before_the_body_ends_are_an_error(server: ServerProcess) -> None:
    with H2Client.connect(server.tcp) as client:
        client.handshake()
        stream_id = client.new_stream()
        headers = client.request_headers("POST", "/streamed-echo")
        client.send_headers(stream_id, headers, end_stream=False)
        client.send_data(stream_id, b"abc", end_stream=False)
        time.sleep(0.1)
        client.send_data(stream_id, b"def", end_stream=False)
        client.send_headers(stream_id, [("x-checksum", "abc123")])
        answer = json.loads(client.response(stream_id).body)
    assert answer["size"] == 6
    assert "read req.body, or iter_body() to its end" in answer["early"]["error"]
    assert answer["trailers"] == KEPT_TRAILERS


def test_h2_trailers_that_leave_the_stream_open_reset_only_that_stream(
    server: ServerProcess,
) -> None:
    with H2Client.connect(server.tcp) as client:
        client.handshake()
        stream_id = client.new_stream()
        client.send_headers(stream_id, client.request_headers("POST", "/echo"), end_stream=False)
        client.send(DataFrame(stream_id, b"body"))
        client.send_headers(stream_id, [("x-checksum", "abc")], end_stream=False)
        client.expect_stream_error(stream_id, ErrorCode.PROTOCOL_ERROR, connection_error=False)
        assert client.get("/ping").body == b"pong"


def test_h2_pseudo_header_in_trailers_resets_only_that_stream(server: ServerProcess) -> None:
    with H2Client.connect(server.tcp) as client:
        client.handshake()
        stream_id = client.new_stream()
        client.send_headers(stream_id, client.request_headers("POST", "/echo"), end_stream=False)
        client.send(DataFrame(stream_id, b"body"))
        client.send_headers(stream_id, [(":path", "/other")])
        client.expect_stream_error(stream_id, ErrorCode.PROTOCOL_ERROR, connection_error=False)
        assert client.get("/ping").body == b"pong"


# -- response trailers -----------------------------------------------------------------------


def test_http11_streamed_answer_ends_with_its_trailers(server: ServerProcess) -> None:
    with connect(server.tcp) as sock:
        sock.sendall(request_bytes("GET", "/digest-stream?n=4", [("TE", "trailers")]))
        res = Reader(sock).read_response()
    assert res.header("transfer-encoding") == "chunked"
    assert res.header("trailer") == "X-Digest, X-Count"
    assert res.body == b"chunk 0;chunk 1;chunk 2;chunk 3;"
    assert res.trailers == {"x-count": "4", "x-digest": digest_of(4)}


def test_http10_client_gets_the_body_without_trailers(server: ServerProcess) -> None:
    with connect(server.tcp) as sock:
        sock.sendall(request_bytes("GET", "/digest-stream", version="HTTP/1.0"))
        reader = Reader(sock)
        res = reader.read_response()
    # Close-delimited: the body is all that follows the head, no trailer section in it.
    assert res.header("transfer-encoding") is None
    assert res.body == b"chunk 0;chunk 1;chunk 2;"


def test_trailers_of_a_buffered_answer_are_dropped_on_both_protocols(
    server: ServerProcess,
) -> None:
    with connect(server.tcp) as sock:
        sock.sendall(request_bytes("GET", "/buffered"))
        res = Reader(sock).read_response()
    assert (res.header("content-length"), res.body, res.trailers) == ("8", b"buffered", {})
    with H2Client.connect(server.tcp) as client:
        client.handshake()
        h2res = client.get("/buffered")
        assert (h2res.body, h2res.trailers) == (b"buffered", []), client.exchange()


def test_h2_streamed_answer_ends_with_a_trailers_headers_frame(server: ServerProcess) -> None:
    with H2Client.connect(server.tcp) as client:
        client.handshake()
        stream_id = client.request("GET", "/digest-stream?n=5", headers=[("te", "trailers")])
        res = client.response(stream_id)
        assert res.body == b"".join(f"chunk {n};".encode() for n in range(5))
        assert res.header("trailer") == "X-Digest, X-Count"
        assert res.trailers == [("x-count", "5"), ("x-digest", digest_of(5))], client.exchange()


@needs_curl
def test_curl_shows_the_trailers_over_h2_and_http11(server: ServerProcess) -> None:
    url = f"{server.url}/digest-stream"
    for protocol in ("--http2-prior-knowledge", "--http1.1"):
        done = subprocess.run(
            ["curl", "-sS", "--max-time", "10", "-i", protocol, "-H", "TE: trailers", url],
            capture_output=True,
            text=True,
            check=True,
        )
        out = done.stdout.lower()
        assert "chunk 0;chunk 1;chunk 2;" in out, done.stdout
        assert out.rstrip().endswith(f"x-digest: {digest_of(3)}"), done.stdout
        assert "x-count: 3" in out.split("chunk 2;")[1], done.stdout


def test_httpx_over_h2_reads_a_streamed_answer_with_trailers(server: ServerProcess) -> None:
    with httpx.Client(http1=False, http2=True, timeout=10) as client:
        res = client.get(f"{server.url}/digest-stream?n=3")
    assert res.http_version == "HTTP/2"
    assert res.content == b"chunk 0;chunk 1;chunk 2;"


# -- the body deadline on HTTP/2 -------------------------------------------------------------


def test_h2_trickled_body_gets_408_and_a_reset_the_connection_serves_on(
    server: ServerProcess,
) -> None:
    with H2Client.connect(server.tcp) as client:
        client.handshake()
        slow = client.new_stream()
        headers = client.request_headers("POST", "/slow", [("content-length", "100")])
        client.send_headers(slow, headers, end_stream=False)
        started = time.monotonic()
        resets: list[int] = []
        answered: float | None = None
        # A byte every 0.3 s: each wait is shorter than body_timeout, the body is not.
        while time.monotonic() - started < BODY_TIMEOUT + 4:
            client.send_data(slow, b"x", end_stream=False)
            for received in client.frames_within(0.3):
                if received.stream_id != slow:
                    continue
                if received.kind == FrameType.HEADERS and answered is None:
                    answered = time.monotonic() - started
                if received.kind == FrameType.RST_STREAM:
                    resets.append(received.error_code)
            if resets:
                break
        record = client.responses[slow]
        assert record.status == 408, client.exchange()
        assert record.body == b"Request body timed out\n"
        # The answer is complete; the client is told to stop sending without an error.
        assert resets[0] == ErrorCode.NO_ERROR, client.exchange()
        assert answered is not None and BODY_TIMEOUT - 0.1 <= answered <= BODY_TIMEOUT + SLACK
        assert client.get("/ping").body == b"pong"  # the connection goes on


def test_h2_body_deadline_is_the_whole_body_while_other_streams_are_served(
    server: ServerProcess,
) -> None:
    with H2Client.connect(server.tcp) as client:
        client.handshake()
        slow = client.new_stream()
        headers = client.request_headers("POST", "/slow", [("content-length", "10")])
        client.send_headers(slow, headers, end_stream=False)
        started = time.monotonic()
        pings = 0
        while client.responses.get(slow) is None or client.responses[slow].status is None:
            assert time.monotonic() - started < BODY_TIMEOUT + 4, client.exchange()
            client.send_data(slow, b"x", end_stream=False)
            assert client.get("/ping").body == b"pong"  # another stream, answered at once
            pings += 1
            client.frames_within(0.25)
        assert client.responses[slow].status == 408
        assert pings >= 3


def test_h2_body_sent_in_time_is_served_whole(server: ServerProcess) -> None:
    with H2Client.connect(server.tcp) as client:
        client.handshake()
        stream_id = client.new_stream()
        headers = client.request_headers("POST", "/slow", [("content-length", "3")])
        client.send_headers(stream_id, headers, end_stream=False)
        for piece in (b"a", b"b"):
            client.send_data(stream_id, piece, end_stream=False)
            time.sleep(BODY_TIMEOUT / 4)
        client.send_data(stream_id, b"c")
        assert client.response(stream_id).body == b"3"


def test_a_body_read_once_the_answer_is_being_written_fails_on_both_protocols(
    server: ServerProcess,
) -> None:
    # The stream's iterable reads the body after the handler returned: too late on both
    # (what arrives meanwhile is not kept), so neither answer can pass for a whole one.
    with connect(server.tcp) as sock:
        sock.sendall(request_bytes("POST", "/echo-stream", body=b"abc"))
        res = Reader(sock).read_response()
    assert (res.status, res.complete) == (200, False)
    with H2Client.connect(server.tcp) as client:
        client.handshake()
        stream_id = client.request("POST", "/echo-stream", body=b"abc")
        client.read_until(lambda r: r.kind == FrameType.RST_STREAM and r.stream_id == stream_id)
        assert client.responses[stream_id].reset == ErrorCode.INTERNAL_ERROR
        assert client.get("/ping").body == b"pong"
