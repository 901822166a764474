"""Streamed and file bodies over real sockets: `res.stream()` is chunked and flushed as
produced rather than buffered whole, `res.send_file()` goes out intact with sendfile."""

from __future__ import annotations

import hashlib
import os
import socket
import time
import uuid
from pathlib import Path

import pytest
import requests

from tests.support.raw_client import Reader, connect, get, request_bytes
from tests.support.serve import ServerProcess

pytestmark = pytest.mark.timeout(60)


def test_stream_is_chunked_and_each_chunk_arrives_before_the_next_is_produced(
    basic_server: ServerProcess,
) -> None:
    key = uuid.uuid4().hex
    with connect(basic_server.address, timeout=3) as sock:
        sock.sendall(request_bytes("GET", f"/stream?key={key}"))
        reader = Reader(sock)
        head = reader.read_head()
        assert head.status == 200
        assert head.header("transfer-encoding") == "chunked"
        assert head.header("content-length") is None
        # The generator is parked until /release: this read only succeeds if the first
        # chunk was flushed on its own (a buffered stream would time out here).
        assert reader.read_chunk() == b"first;"
        assert get(basic_server.address, f"/release?key={key}").body == b"released"
        assert reader.read_chunk() == b"second;"
        assert reader.read_chunk() == b"third."
        assert reader.read_chunk() == b""  # the terminating 0-chunk and its blank line
        # and the connection is still good for another request
        sock.sendall(request_bytes("GET", "/ping"))
        assert reader.read_response().body == b"pong"


def test_stream_slow_to_yield_its_first_chunk_is_not_cut_by_request_timeout(
    basic_server: ServerProcess,
) -> None:
    # request_timeout (1 s here) bounds the handler; the producer of a stream is not a stalled
    # handler, before its first chunk no more than after it.
    with connect(basic_server.address) as sock:
        sock.sendall(
            request_bytes("GET", "/stream-slow-start?s=1.6") + request_bytes("GET", "/ping")
        )
        reader = Reader(sock)
        res = reader.read_response()
        assert (res.status, res.body, res.complete) == (200, b"late but whole", True)
        assert reader.read_response().body == b"pong"


def test_stream_read_by_requests_reassembles_the_chunks(basic_server: ServerProcess) -> None:
    host, port = basic_server.tcp
    res = requests.get(f"http://{host}:{port}/stream-plain", timeout=5)
    assert res.status_code == 200
    assert res.headers["Transfer-Encoding"] == "chunked"
    assert res.content == b"a" * 10 + b"b" * 10 + b"c" * 10


def test_http10_stream_is_close_delimited(basic_server: ServerProcess) -> None:
    with connect(basic_server.address) as sock:
        sock.sendall(request_bytes("GET", "/stream-plain", version="HTTP/1.0", host=False))
        reader = Reader(sock)
        res = reader.read_response()
    assert res.header("transfer-encoding") is None
    assert res.header("content-length") is None
    assert res.header("connection") == "close"
    assert res.body == b"a" * 10 + b"b" * 10 + b"c" * 10


def test_head_of_a_stream_gives_headers_only_and_keeps_the_connection(
    basic_server: ServerProcess,
) -> None:
    with connect(basic_server.address) as sock:
        sock.sendall(request_bytes("HEAD", "/stream-plain") + request_bytes("GET", "/ping"))
        reader = Reader(sock)
        head = reader.read_response(head_request=True)
        assert head.status == 200
        assert reader.read_response().body == b"pong"  # no chunk leaked after the head


@pytest.mark.parametrize("target", ["/stream-fail", "/stream-timeout"])
def test_stream_whose_generator_raises_is_truncated_and_the_worker_survives(
    basic_server: ServerProcess, target: str
) -> None:
    pid = get(basic_server.address, "/pid").body
    with connect(basic_server.address) as sock:
        sock.sendall(request_bytes("GET", target))
        reader = Reader(sock)
        res = reader.read_response()
        assert res.status == 200
        assert res.chunks == [b"partial;"]
        assert not res.complete  # no terminating 0-chunk: the client can tell it broke
        assert reader.at_eof()
    assert get(basic_server.address, "/pid").body == pid


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A 5 MB file of random bytes and its sha256."""
    path = tmp_path_factory.mktemp("files") / "big.bin"
    data = os.urandom(5 * 1024 * 1024)
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


def test_send_file_of_5_mb_arrives_intact_with_content_length(
    basic_server: ServerProcess, big_file: tuple[Path, str]
) -> None:
    path, digest = big_file
    host, port = basic_server.tcp
    with requests.Session() as session:
        res = session.get(f"http://{host}:{port}/file", params={"path": str(path)}, timeout=10)
        assert res.status_code == 200
        assert res.headers["Content-Length"] == str(5 * 1024 * 1024)
        assert hashlib.sha256(res.content).hexdigest() == digest
        # keep-alive after a sendfile body: the next answer is not mixed into the file
        assert session.get(f"http://{host}:{port}/ping", timeout=5).text == "pong"


def test_head_of_a_file_gives_its_headers_and_no_body(
    basic_server: ServerProcess, big_file: tuple[Path, str]
) -> None:
    path, _ = big_file
    with connect(basic_server.address) as sock:
        sock.sendall(request_bytes("HEAD", f"/file?path={path}") + request_bytes("GET", "/ping"))
        reader = Reader(sock)
        head = reader.read_response(head_request=True)
        assert (head.status, head.header("content-length")) == (200, str(5 * 1024 * 1024))
        # The very next bytes are the /ping answer: no file bytes leaked after the head.
        assert reader.read_response().body == b"pong"


def test_file_read_slowly_for_longer_than_idle_timeout_still_arrives_whole(
    basic_server: ServerProcess, big_file: tuple[Path, str]
) -> None:
    # A slow reader keeps making progress, so it must not be cut like a stalled one: reading
    # 5 MB in 64 KiB steps 40 ms apart takes about 3 s, longer than idle_timeout (2 s).
    path, digest = big_file
    received = bytearray()
    with connect(basic_server.address, timeout=5) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        sock.sendall(request_bytes("GET", f"/file?path={path}", [("Connection", "close")]))
        while data := sock.recv(65536):
            received += data
            time.sleep(0.04)
    head, _, body = bytes(received).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert hashlib.sha256(body).hexdigest() == digest


def test_client_that_stops_reading_a_file_is_dropped_after_idle_timeout(
    basic_server: ServerProcess, big_file: tuple[Path, str]
) -> None:
    # A stalled reader must not hold its connection (and the file) forever: once a send has
    # been blocked for idle_timeout (2 s) the server gives up. Four pipelined copies (20 MB)
    # are more than the socket buffers hold.
    path, _ = big_file
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    sock.settimeout(5)
    with sock:
        sock.connect(basic_server.address)
        sock.sendall(request_bytes("GET", f"/file?path={path}") * 4)
        time.sleep(0.5)
        started = time.monotonic()
        assert get(basic_server.address, "/ping").body == b"pong"  # others are not held up
        assert time.monotonic() - started < 0.5
        time.sleep(3.0)  # never reading: idle_timeout passes with the send blocked
        received = 0
        try:
            while data := sock.recv(1 << 20):
                received += len(data)
        except ConnectionResetError:
            pass
    assert received < 4 * 5 * 1024 * 1024, "the whole pipeline was delivered to a stalled reader"
