"""Bodies over TLS: send_file (chunked copies instead of sendfile) arrives intact, keep-alive
and pipelining work on one TLS connection, streams are flushed chunk by chunk."""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from tests.server.tls_clients import client_context
from tests.support.pki import Pki
from tests.support.raw_client import Reader, connect, request_bytes
from tests.support.serve import ServerProcess

pytestmark = pytest.mark.timeout(60)

FIVE_MB = 5 * 1024 * 1024


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A 5 MiB file of random bytes (plus 7, so it ends mid-record) and its sha256."""
    path = tmp_path_factory.mktemp("files") / "big.bin"
    data = os.urandom(FIVE_MB + 7)
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


def test_send_file_of_5_mb_arrives_intact_over_tls(
    https_server: ServerProcess, pki: Pki, big_file: tuple[Path, str]
) -> None:
    path, digest = big_file
    host, port = https_server.tcp
    conn = http.client.HTTPSConnection(host, port, context=client_context(pki), timeout=10)
    try:
        for _ in range(2):  # twice on one connection: the file leaves it reusable
            conn.request("GET", f"/file?path={path}")
            res = conn.getresponse()
            assert res.status == 200
            assert res.getheader("Content-Length") == str(FIVE_MB + 7)
            assert hashlib.sha256(res.read()).hexdigest() == digest
        conn.request("GET", "/ping")
        assert conn.getresponse().read() == b"pong"
    finally:
        conn.close()


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_send_file_read_by_curl_slowly_arrives_intact(
    https_server: ServerProcess, pki: Pki, big_file: tuple[Path, str]
) -> None:
    # A reader slower than the server fills the socket buffer: the server must wait for
    # writability with ciphertext pending, many times over, without losing a byte.
    path, digest = big_file
    host, port = https_server.tcp
    done = subprocess.run(
        ["curl", "-sS", "--max-time", "20", "--limit-rate", "4M", "--cacert", pki.ca,
         f"https://{host}:{port}/file?path={path}"],
        capture_output=True, timeout=25,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert hashlib.sha256(done.stdout).hexdigest() == digest


def test_large_body_to_a_reader_with_a_small_window_arrives_intact(
    https_server: ServerProcess, pki: Pki
) -> None:
    # A small receive buffer makes the kernel take the ciphertext a little at a time: the
    # unsent rest is carried across many writability waits (as a view, never re-copied).
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    raw.settimeout(10)
    raw.connect(https_server.tcp)
    with client_context(pki).wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        sock.sendall(request_bytes("GET", "/big?mb=8", [("Connection", "close")]))
        res = Reader(sock).read_response()
    pattern = bytes(range(251))
    expected = (pattern * ((8 << 20) // len(pattern) + 1))[: 8 << 20]
    assert (res.status, len(res.body)) == (200, 8 << 20)
    assert res.body == expected


def test_keep_alive_serves_many_requests_on_one_tls_connection(
    https_server: ServerProcess, pki: Pki
) -> None:
    with connect(https_server.address, tls=client_context(pki)) as sock:
        reader = Reader(sock)
        for index in range(50):
            body = f"request {index}".encode()
            sock.sendall(request_bytes("POST", "/echo", body=body))
            res = reader.read_response()
            assert (res.status, res.body) == (200, body)
            assert res.header("connection") != "close"


def test_pipelined_requests_in_one_tls_write_are_answered_in_order(
    https_server: ServerProcess, pki: Pki
) -> None:
    with connect(https_server.address, tls=client_context(pki)) as sock:
        batch = b"".join(
            request_bytes("POST", "/echo", body=f"#{index}".encode()) for index in range(20)
        )
        sock.sendall(batch + request_bytes("GET", "/ping", [("Connection", "close")]))
        reader = Reader(sock)
        bodies = [reader.read_response().body for _ in range(21)]
        assert bodies == [f"#{index}".encode() for index in range(20)] + [b"pong"]
        assert reader.at_eof()


def test_stream_is_chunked_over_tls_and_the_connection_stays_usable(
    https_server: ServerProcess, pki: Pki
) -> None:
    with connect(https_server.address, tls=client_context(pki)) as sock:
        sock.sendall(request_bytes("GET", "/stream?n=8"))
        reader = Reader(sock)
        head = reader.read_head()
        assert (head.status, head.header("transfer-encoding")) == (200, "chunked")
        chunks = [reader.read_chunk() for _ in range(9)]
        assert chunks == [f"part {index};".encode() for index in range(8)] + [b""]
        sock.sendall(request_bytes("GET", "/ping"))
        assert reader.read_response().body == b"pong"


def test_http10_stream_over_tls_ends_with_close_notify(
    https_server: ServerProcess, pki: Pki
) -> None:
    # A close-delimited body is only trustworthy over TLS when the close is authenticated.
    raw = socket.create_connection(https_server.tcp, timeout=5)
    context = client_context(pki)
    with context.wrap_socket(raw, server_hostname="127.0.0.1", suppress_ragged_eofs=False) as sock:
        sock.sendall(request_bytes("GET", "/stream?n=3", version="HTTP/1.0", host=False))
        res = Reader(sock).read_response()  # reads to EOF; a bare TCP close would raise
    assert res.header("content-length") is None
    assert res.body == b"part 0;part 1;part 2;"
