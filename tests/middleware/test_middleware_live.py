"""The middleware on the real server (`socketify run`, one worker) with real clients: sendfile
and ranges with curl, compression on the wire, a CORS preflight, and a 50 MiB upload whose
worker RSS must stay bounded."""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.support.serve import Launcher, ServerProcess

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")

BIG_SIZE = 8 * 1024 * 1024 + 123  # larger than a socket buffer: sendfile must loop
UPLOAD_SIZE = 50 * 1024 * 1024
RSS_BUDGET_KIB = 10 * 1024


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("live-site")
    (root / "big.bin").write_bytes(os.urandom(BIG_SIZE))
    (root / "hello.txt").write_bytes(b"Hello, live world!\n")
    (root / "empty.txt").write_bytes(b"")
    (root / "app.js").write_bytes(b"let x = 1;\n" * 100)
    (root / "app.js.gz").write_bytes(gzip.compress(b"let x = 1;\n" * 100))
    (root / "docs").mkdir()
    (root / "docs" / "index.html").write_bytes(b"<h1>docs</h1>\n")
    return root


@pytest.fixture(scope="module")
def server(site: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = {"SOCKETIFY_TEST_STATIC_ROOT": str(site)}
    with Launcher(tmp_path_factory.mktemp("static-app")) as launcher:
        yield launcher("tests.middleware.apps.static_app:server", workers=1, env=env)


def curl(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["curl", "-sS", *args], capture_output=True, timeout=60, check=True)


def head_of(output: bytes) -> tuple[int, dict[str, str]]:
    """Status and headers of the last response in a `curl -D -` dump."""
    block = output.strip().split(b"\r\n\r\n")[-1].decode("latin-1").split("\r\n")
    headers = {}
    for line in block[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(block[0].split()[1]), headers


def test_big_file_is_sent_whole_and_intact(
    server: ServerProcess, site: Path, tmp_path: Path
) -> None:
    out = tmp_path / "big.bin"
    dump = curl("-D", "-", "-o", str(out), f"{server.url}/static/big.bin").stdout
    status, headers = head_of(dump)
    assert status == 200 and headers["content-length"] == str(BIG_SIZE)
    assert out.read_bytes() == (site / "big.bin").read_bytes()


def test_ranges_with_curl(server: ServerProcess, site: Path) -> None:
    data = (site / "big.bin").read_bytes()
    partial = curl("-D", "/dev/stderr", "-r", "1000-1999", f"{server.url}/static/big.bin")
    assert partial.stdout == data[1000:2000]
    status, headers = head_of(partial.stderr)
    assert status == 206 and headers["content-range"] == f"bytes 1000-1999/{BIG_SIZE}"
    tail = curl("-r", "-100", f"{server.url}/static/big.bin").stdout
    assert tail == data[-100:]
    middle = curl("-r", f"{BIG_SIZE - 10}-", f"{server.url}/static/big.bin").stdout
    assert middle == data[-10:]
    multi = curl("-D", "/dev/stderr", "-r", "0-0,5-6", f"{server.url}/static/big.bin")
    assert head_of(multi.stderr)[0] == 200 and multi.stdout == data
    url = f"{server.url}/static/big.bin"
    refused = curl("-D", "-", "-o", "/dev/null", "-r", f"{BIG_SIZE}-", url)
    status, headers = head_of(refused.stdout)
    assert status == 416 and headers["content-range"] == f"bytes */{BIG_SIZE}"


def test_small_empty_and_head_file_answers_on_one_keep_alive_connection(
    server: ServerProcess,
) -> None:
    """Each answer arrives whole and at once, whatever the file sender does with the head."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=3)
    try:
        for method, name, body in [
            ("GET", "empty.txt", b""),
            ("GET", "hello.txt", b"Hello, live world!\n"),
            ("HEAD", "hello.txt", b""),
            ("GET", "empty.txt", b""),
            ("GET", "hello.txt", b"Hello, live world!\n"),
        ]:
            connection.request(method, f"/static/{name}")
            response = connection.getresponse()
            assert response.status == 200 and response.read() == body
            assert response.getheader("Connection") is None  # not "close": the connection stays
    finally:
        connection.close()


def test_conditional_get_and_head(server: ServerProcess) -> None:
    first = curl("-D", "-", "-o", "/dev/null", f"{server.url}/static/hello.txt").stdout
    etag = head_of(first)[1]["etag"]
    again = curl("-D", "-", "-H", f"If-None-Match: {etag}", f"{server.url}/static/hello.txt")
    status, headers = head_of(again.stdout)
    assert status == 304 and "content-length" not in headers
    head = curl("-I", f"{server.url}/static/hello.txt").stdout
    assert head_of(head)[1]["content-length"] == "19"


def test_directory_redirect_and_traversal(server: ServerProcess) -> None:
    dump = curl("-D", "-", "-o", "/dev/null", f"{server.url}/static/docs").stdout
    status, headers = head_of(dump)
    assert status == 301 and headers["location"] == "/static/docs/"
    assert curl("-L", f"{server.url}/static/docs").stdout == b"<h1>docs</h1>\n"
    for target in ("/static/%2e%2e/%2e%2e/etc/passwd", "/static/..%2f..%2fetc%2fpasswd"):
        dump = curl("--path-as-is", "-D", "-", "-o", "/dev/null", server.url + target).stdout
        assert head_of(dump)[0] in (400, 404)


def test_compression_on_the_wire(server: ServerProcess) -> None:
    dump = curl("-D", "/dev/stderr", "--compressed", f"{server.url}/text")
    headers = head_of(dump.stderr)[1]
    assert headers["content-encoding"] == "gzip" and headers["vary"] == "Origin, Accept-Encoding"
    assert dump.stdout == b"compress me, please. " * 200
    sibling = curl("-D", "/dev/stderr", "--compressed", f"{server.url}/static/app.js")
    assert head_of(sibling.stderr)[1]["content-encoding"] == "gzip"
    assert sibling.stdout == b"let x = 1;\n" * 100


def test_cors_preflight(server: ServerProcess) -> None:
    dump = curl(
        "-D", "-", "-o", "/dev/null", "-X", "OPTIONS",
        "-H", "Origin: https://app.example",
        "-H", "Access-Control-Request-Method: PUT",
        "-H", "Access-Control-Request-Headers: X-Token",
        f"{server.url}/anything",
    ).stdout  # fmt: skip
    status, headers = head_of(dump)
    assert status == 204
    assert headers["access-control-allow-origin"] == "https://app.example"
    assert headers["access-control-allow-credentials"] == "true"
    assert headers["access-control-allow-headers"] == "X-Token"
    assert "PUT" in headers["access-control-allow-methods"]


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def test_50_mib_upload_keeps_worker_rss_bounded(server: ServerProcess, tmp_path: Path) -> None:
    payload = tmp_path / "upload.bin"
    with open(payload, "wb") as out:
        block = os.urandom(1 << 20)
        for _ in range(UPLOAD_SIZE >> 20):
            out.write(block)
    digest = hashlib.sha256(payload.read_bytes()).hexdigest()
    (pid,) = server.workers()
    curl(f"{server.url}/ping")  # warm: the route, the JSON path
    before = status_kib(pid, "VmRSS")
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # reset the peak (VmHWM) to now
        peak_field = "VmHWM"
    except OSError:
        peak_field = "VmRSS"  # no permission: the RSS after the upload is the best we have
    answer = curl("-F", "name=report", "-F", f"file=@{payload}", f"{server.url}/upload").stdout
    result = orjson.loads(answer)
    assert result == {
        "name": "report",
        "filename": "upload.bin",
        "size": UPLOAD_SIZE,
        "sha256": digest,
        "in_memory": False,
    }
    growth = status_kib(pid, peak_field) - before
    print(f"worker RSS before {before} KiB, {peak_field} growth {growth} KiB")
    assert growth < RSS_BUDGET_KIB, f"worker RSS grew {growth} KiB for a 50 MiB upload"
