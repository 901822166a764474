"""Flask served by the real `socketify run` (detected as a WSGI app), with real clients:
JSON, `stream_with_context`, sessions, `send_file`, error handlers, large uploads (with a
length, chunked, multipart), 100-continue, HEAD, HTTP/2, `--root-path`, proxies, and the
body's `close()` when a client leaves mid-stream.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import requests

from tests.support.raw_client import Reader, connect, request_bytes
from tests.support.serve import Launcher, ServerProcess
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(60)

REPORT = os.urandom(300_000)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("wsgi-data")
    (path / "report.bin").write_bytes(REPORT)
    return path


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory, data_dir: Path
) -> Iterator[dict[str, ServerProcess]]:
    env = {"WSGI_TEST_DIR": str(data_dir)}
    with Launcher(tmp_path_factory.mktemp("flask")) as launch:
        started = {
            "flask": launch("tests.wsgi.apps:app", env=env, wait=False),
            "proxied": launch(
                "tests.wsgi.apps:app",
                args=("--root-path", "/shop", "--trust-proxy"),
                env=env,
                wait=False,
            ),
            "endless": launch("tests.wsgi.apps:endless", args=("--wsgi",), env=env, wait=False),
        }
        for server in started.values():
            server.wait_serving()
        yield started


@pytest.fixture
def flask(servers: dict[str, ServerProcess]) -> str:
    return servers["flask"].url


def test_flask_answers_json(flask: str) -> None:
    response = requests.get(f"{flask}/ping", timeout=5)
    assert response.status_code == 200
    assert response.json() == {"ok": True}
    assert response.headers["Content-Type"] == "application/json"


def test_head_has_the_get_answers_length_and_no_body(flask: str) -> None:
    with connect(("127.0.0.1", int(flask.rsplit(":", 1)[1]))) as sock:
        sock.sendall(request_bytes("HEAD", "/ping", [("Connection", "close")]))
        reader = Reader(sock)
        head = reader.read_response(head_request=True)
        assert head.status == 200
        assert head.headers["content-length"] == "12"
        assert reader.at_eof()  # nothing after the head


def test_stream_with_context_streams_chunked_with_the_request_context(flask: str) -> None:
    with requests.get(f"{flask}/stream?count=5&word=tock", stream=True, timeout=5) as response:
        assert response.headers["Transfer-Encoding"] == "chunked"
        lines = [line for line in response.iter_lines() if line]
    assert lines == [f"tock {n}".encode() for n in range(5)]


def test_the_session_cookie_carries_the_session(flask: str) -> None:
    with requests.Session() as client:
        assert client.post(f"{flask}/session/blue", timeout=5).json() == {"stored": "blue"}
        assert client.get(f"{flask}/session", timeout=5).json() == {"value": "blue"}
    assert requests.get(f"{flask}/session", timeout=5).json() == {"value": None}


def test_send_file_sends_the_file(flask: str) -> None:
    response = requests.get(f"{flask}/download", timeout=5)
    assert response.status_code == 200
    assert response.content == REPORT
    assert response.headers["Content-Length"] == str(len(REPORT))
    assert "attachment" in response.headers["Content-Disposition"]


def test_send_file_answers_a_range(flask: str) -> None:
    response = requests.get(f"{flask}/download", headers={"Range": "bytes=100-199"}, timeout=5)
    assert response.status_code == 206
    assert response.content == REPORT[100:200]


def test_error_handlers_answer(flask: str) -> None:
    teapot = requests.get(f"{flask}/teapot", timeout=5)
    assert (teapot.status_code, teapot.json()) == (418, {"error": "teapot"})
    lookup = requests.get(f"{flask}/boom", timeout=5)
    assert lookup.status_code == 404
    assert "nothing here" in lookup.json()["error"]
    assert requests.get(f"{flask}/missing", timeout=5).status_code == 404


def test_a_large_upload_with_a_length_is_read_as_it_streams(flask: str) -> None:
    body = os.urandom(5 * 1024 * 1024)
    response = requests.post(f"{flask}/upload", data=body, timeout=20)
    assert response.json() == {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()}


def test_a_chunked_upload_is_read_to_its_end(flask: str) -> None:
    pieces = [os.urandom(100_000) for _ in range(20)]
    response = requests.post(f"{flask}/upload", data=iter(pieces), timeout=20)
    whole = b"".join(pieces)
    assert response.json() == {"size": len(whole), "sha256": hashlib.sha256(whole).hexdigest()}


def test_a_multipart_file_upload(flask: str) -> None:
    content = os.urandom(2 * 1024 * 1024)
    response = requests.post(
        f"{flask}/files",
        files={"file": ("big.bin", content)},
        data={"note": "hello"},
        timeout=20,
    )
    assert response.json() == {"name": "big.bin", "size": len(content), "field": "hello"}


def test_100_continue_is_sent_when_the_app_first_reads(flask: str) -> None:
    port = int(flask.rsplit(":", 1)[1])
    with connect(("127.0.0.1", port)) as sock:
        head = request_bytes(
            "POST", "/upload", [("Content-Length", "5"), ("Expect", "100-continue")]
        )
        sock.sendall(head)
        reader = Reader(sock)
        interim = reader.read_head()
        assert interim.status == 100
        sock.sendall(b"hello")
        final = reader.read_response()
        assert final.status == 200
        assert b'"size":5' in final.body


def test_an_app_that_does_not_read_gets_no_100_continue(flask: str) -> None:
    port = int(flask.rsplit(":", 1)[1])
    with connect(("127.0.0.1", port)) as sock:
        sock.sendall(
            request_bytes(
                "POST",
                "/session/x",
                [("Content-Length", "100"), ("Expect", "100-continue"), ("Connection", "close")],
            )
        )
        response = Reader(sock).read_response()
        assert response.status == 200  # answered without the body, never asked for


def test_http2_cleartext_with_httpx(flask: str) -> None:
    with httpx.Client(http1=False, http2=True) as client:
        response = client.get(f"{flask}/ping")
        assert response.http_version == "HTTP/2"
        assert response.json() == {"ok": True}
        posted = client.post(f"{flask}/upload", content=b"h2 body")
        assert posted.json()["size"] == 7


def test_root_path_and_trusted_proxy_headers(servers: dict[str, ServerProcess]) -> None:
    url = servers["proxied"].url
    response = requests.get(
        f"{url}/where",
        headers={
            "X-Forwarded-For": "198.51.100.7",
            "X-Forwarded-Proto": "https",
            "X-Forwarded-Host": "shop.example",
        },
        timeout=5,
    )
    assert response.json() == {
        "script_root": "/shop",
        "path": "/where",
        "url": "https://shop.example/shop/where",
        "remote_addr": "198.51.100.7",
        "scheme": "https",
    }


def test_the_body_is_closed_when_the_client_leaves(
    servers: dict[str, ServerProcess], data_dir: Path
) -> None:
    server = servers["endless"]
    with connect(server.tcp) as sock:
        sock.sendall(request_bytes("GET", "/left"))
        reader = Reader(sock)
        assert reader.read_head().status == 200
        assert reader.read_chunk()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    wait_for(lambda: (data_dir / "closed-left").exists(), 10, message="close() after a reset")


def test_the_body_is_closed_when_an_http2_client_resets_the_stream(
    servers: dict[str, ServerProcess], data_dir: Path
) -> None:
    server = servers["endless"]
    with (
        httpx.Client(http1=False, http2=True) as client,
        client.stream("GET", f"{server.url}/reset") as response,
    ):
        assert response.status_code == 200
        next(response.iter_bytes())
    wait_for(lambda: (data_dir / "closed-reset").exists(), 10, message="close() after RST")
