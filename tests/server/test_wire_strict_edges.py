"""The strict edges over a real socket: bare LF, any token method, Host, and response header
bytes, on HTTP/1.1 and on h2c, through `socketify run`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.edges_app import CONTROL_BYTES
from tests.support.raw_client import Reader, connect, request_bytes
from tests.support.raw_h2 import ErrorCode, H2Client
from tests.support.serve import Launcher, ServerProcess

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def edges(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess]]:
    """The strict server and the one that allows bare LF, one worker each."""
    with Launcher(tmp_path_factory.mktemp("edges")) as launcher:
        yield {
            "strict": launcher("tests.server.edges_app:server", wait=False),
            "lenient": launcher("tests.server.edges_app:lenient", wait=False),
        }


@pytest.fixture(scope="module")
def strict(edges: dict[str, ServerProcess]) -> ServerProcess:
    return edges["strict"].wait_serving()


@pytest.fixture(scope="module")
def lenient(edges: dict[str, ServerProcess]) -> ServerProcess:
    return edges["lenient"].wait_serving()


def exchange(server: ServerProcess, raw: bytes) -> tuple[int, dict[str, str], bytes, bool]:
    """Send `raw`, read one answer: status, headers, body, and whether the server said
    `Connection: close` and then closed."""
    with connect(server.address) as sock:
        sock.sendall(raw)
        reader = Reader(sock)
        res = reader.read_response()
        closed = res.header("connection") == "close" and reader.at_eof()
    return res.status, res.headers, res.body, closed


# -- bare LF ----------------------------------------------------------------------------------

BARE_LF = {
    "everywhere": b"GET /ping HTTP/1.1\nHost: a\n\n",
    "after the request line": b"GET /ping HTTP/1.1\nHost: a\r\n\r\n",
    "ending the head": b"GET /ping HTTP/1.1\r\nHost: a\r\n\n",
    "hiding a Content-Length": (
        b"POST /ping HTTP/1.1\r\nHost: a\r\nDummy: x\nContent-Length: 23\r\n\r\n"
        b"GET /ping HTTP/1.1\r\n\r\n"
    ),
}


@pytest.mark.parametrize("case", list(BARE_LF))
def test_a_bare_lf_in_the_request_head_gets_400_and_close(strict: ServerProcess, case: str) -> None:
    status, headers, body, closed = exchange(strict, BARE_LF[case])
    assert (status, headers["connection"], closed) == (400, "close", True)
    assert body.startswith(b"Bad Request: Bare LF")


def test_a_bare_cr_in_the_request_head_gets_400(strict: ServerProcess) -> None:
    status, _, body, closed = exchange(strict, b"GET /ping HTTP/1.1\rHost: a\r\n\r\n")
    assert (status, closed) == (400, True)
    assert body.startswith(b"Bad Request: Bare CR")


def test_allow_bare_lf_serves_bare_lf_heads(lenient: ServerProcess) -> None:
    status, _, body, _ = exchange(lenient, b"GET /ping HTTP/1.1\nHost: a\nConnection: close\n\n")
    assert (status, body) == (200, b"pong")


# -- methods ----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["PROPFIND", "REPORT", "MKCOL", "PURGE", "get", "BREW"])
def test_any_token_method_reaches_an_any_route(strict: ServerProcess, method: str) -> None:
    status, _, body, _ = exchange(strict, request_bytes(method, "/dav"))
    assert (status, body) == (200, f"{method} reached the any() route".encode())


@pytest.mark.parametrize("method", ["PROPFIND", "PURGE", "get"])
def test_a_method_the_path_has_no_route_for_gets_405_with_allow(
    strict: ServerProcess, method: str
) -> None:
    status, headers, _, closed = exchange(strict, request_bytes(method, "/only-get"))
    assert (status, headers["allow"], closed) == (405, "GET, HEAD", False)


def test_an_unknown_method_on_an_unknown_path_gets_404(strict: ServerProcess) -> None:
    assert exchange(strict, request_bytes("PROPFIND", "/nowhere"))[0] == 404


def test_a_method_that_is_not_a_token_gets_400(strict: ServerProcess) -> None:
    status, _, _, closed = exchange(strict, b"GE(T /ping HTTP/1.1\r\nHost: a\r\n\r\n")
    assert (status, closed) == (400, True)


def test_any_token_method_reaches_an_any_route_over_h2c(strict: ServerProcess) -> None:
    with H2Client.connect(strict.tcp) as client:
        client.handshake()
        answer = client.response(client.request("PROPFIND", "/dav"))
        assert (answer.status, answer.body) == (200, b"PROPFIND reached the any() route")
        refused = client.response(client.request("MKCOL", "/only-get"))
        assert (refused.status, refused.header("allow")) == (405, "GET, HEAD")


# -- Host -------------------------------------------------------------------------------------

BAD_HOSTS = ["a b", "evil.com/x?@a", "user@good.example", "[::1", "a:b", "ex ample:80", "%zz"]


@pytest.mark.parametrize("host", BAD_HOSTS)
def test_a_host_that_is_not_a_valid_authority_gets_400(strict: ServerProcess, host: str) -> None:
    raw = f"GET /host HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    status, _, body, closed = exchange(strict, raw)
    assert (status, closed) == (400, True)
    assert body == b"Bad Request: Host is not a valid authority\n"


@pytest.mark.parametrize("host", ["example.com:8080", "127.0.0.1", "[::1]:80", "localhost"])
def test_a_valid_host_is_served_and_returned_by_req_host(strict: ServerProcess, host: str) -> None:
    raw = f"GET /host HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
    assert exchange(strict, raw)[::2] == (200, host.encode())


@pytest.mark.parametrize("authority", ["a b", "evil.com/x?@a", "user@good.example"])
def test_an_h2_authority_that_is_not_valid_resets_its_stream(
    strict: ServerProcess, authority: str
) -> None:
    with H2Client.connect(strict.tcp) as client:
        client.handshake()
        client.authority = authority
        bad = client.request("GET", "/host")
        client.authority = "example.com"
        client.expect_stream_error(bad, ErrorCode.PROTOCOL_ERROR)
        good = client.response(client.request("GET", "/host"))
        assert (good.status, good.body) == (200, b"example.com")


# -- response header values -------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CONTROL_BYTES))
def test_a_control_byte_in_a_response_header_is_a_500_and_never_sent(
    strict: ServerProcess, name: str
) -> None:
    with connect(strict.address) as sock:
        sock.sendall(request_bytes("GET", f"/bad-header?byte={name}", [("Connection", "close")]))
        wire = b""
        while chunk := sock.recv(65536):
            wire += chunk
    assert wire.startswith(b"HTTP/1.1 500 ")
    assert b"X-Note" not in wire and CONTROL_BYTES[name].encode() not in wire


@pytest.mark.parametrize("name", ["esc", "del"])
def test_a_control_byte_in_a_response_header_is_a_500_over_h2c(
    strict: ServerProcess, name: str
) -> None:
    with H2Client.connect(strict.tcp) as client:
        client.handshake()
        answer = client.response(client.request("GET", f"/bad-header?byte={name}"))
        assert answer.status == 500
        assert answer.header("x-note") is None


# -- the JSON bound ---------------------------------------------------------------------------


def rss_mib(pid: int) -> float:
    """The resident memory of process `pid`, in MiB."""
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def json_array(size: int) -> bytes:
    return b"[" + b",".join([b"0"] * (size // 2)) + b"]"


def test_a_15_mb_json_array_under_the_body_limit_is_413_and_costs_the_worker_little(
    strict: ServerProcess,
) -> None:
    (worker,) = strict.workers()
    before = rss_mib(worker)
    text = json_array(15_000_000)
    framed = request_bytes("POST", "/json", [("Content-Length", str(len(text)))])
    chunked = request_bytes("POST", "/json", [("Transfer-Encoding", "chunked")])
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(piece), piece)
        for piece in (text[i : i + 65536] for i in range(0, len(text), 65536))
    )
    for raw in (framed + text, chunked + chunks + b"0\r\n\r\n"):
        with connect(strict.address, timeout=30) as sock:
            sock.sendall(raw[:200_000])  # the rest may never be read: a 413 can come first
            try:
                sock.sendall(raw[200_000:])
            except OSError:
                pass
            answer = Reader(sock).read_response()
        assert (answer.status, answer.body) == (413, b"JSON body too large\n")
    assert rss_mib(worker) - before < 100  # parsing it took the worker to 281 MiB
    small = json_array(100_000)
    with connect(strict.address) as sock:
        sock.sendall(request_bytes("POST", "/json", [("Connection", "close")], small))
        assert Reader(sock).read_response().body == b'{"items":50000}'


# -- the request corpus, live -----------------------------------------------------------------

CORPUS = Path(__file__).parents[1] / "protocol" / "corpus"


@pytest.mark.parametrize("path", sorted((CORPUS / "invalid").glob("*.http")), ids=lambda p: p.stem)
def test_every_refused_request_of_the_corpus_gets_its_status_and_close_live(
    strict: ServerProcess, path: Path
) -> None:
    expected = int(path.stem.split("_", 1)[0])
    status, _, _, closed = exchange(strict, path.read_bytes())
    assert (status, closed) == (expected, True)


@pytest.mark.parametrize("path", sorted((CORPUS / "valid").glob("*.http")), ids=lambda p: p.stem)
def test_every_request_of_the_valid_corpus_is_answered_live(
    strict: ServerProcess, path: Path
) -> None:
    count = int(path.stem.split("_", 1)[0])
    with connect(strict.address) as sock:
        sock.sendall(path.read_bytes())
        reader = Reader(sock)
        statuses = [reader.read_response().status for _ in range(count)]
    assert all(status in (200, 204, 404, 405) for status in statuses), statuses
