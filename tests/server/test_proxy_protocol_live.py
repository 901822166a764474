"""PROXY protocol on the real server: HAProxy (v1, v2, TLS passthrough, TLS ended at HAProxy)
and raw sockets (valid, LOCAL, missing, malformed, too slow, from a network not allowed).

Clients connect from 127.0.0.55 while HAProxy connects to us from 127.0.0.1, so the address
the app and the access log report tells the header's client from the proxy's own address.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import struct
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from socketify.protocol.proxy_header import V2_SIGNATURE
from tests.server.tls_clients import client_context
from tests.support.haproxy import Frontend, HaProxy
from tests.support.pki import Pki
from tests.support.ports import free_port
from tests.support.serve import Launcher, ServerProcess, run_cli
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(60)

CLIENT = "127.0.0.55"  # the client's own address; HAProxy reaches us from 127.0.0.1
APP = "tests.server.proxy_app"


@dataclass
class Setup:
    """The servers and HAProxy frontends the module's tests share."""

    server: ServerProcess  # --proxy-protocol on an http:// and an https:// bind
    http_port: int
    https_port: int
    refusing: ServerProcess  # --proxy-allow 10.0.0.0/8: loopback may not send the header
    per_bind: ServerProcess  # proxy_protocol=[first bind] only
    per_bind_plain_port: int
    haproxy: dict[str, int]  # frontend name -> port


@pytest.fixture(scope="module")
def setup(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    directory = tmp_path_factory.mktemp("proxy")
    http_port, https_port = free_port(), free_port()
    proxied_port, plain_port = free_port(), free_port()
    with Launcher(directory) as launcher:
        server = launcher(
            f"{APP}:server",
            bind=f"http://127.0.0.1:{http_port}",
            args=["--bind", f"https://127.0.0.1:{https_port}",
                  "--certfile", pki.server.cert, "--keyfile", pki.server.key,
                  "--proxy-protocol", "--access-log-format", "common"],
            wait=False,
        )  # fmt: skip
        refusing = launcher(
            f"{APP}:server",
            args=["--proxy-protocol", "--proxy-allow", "10.0.0.0/8,2001:db8::/32"],
            wait=False,
        )
        per_bind = launcher(
            f"{APP}:per_bind",
            bind=f"127.0.0.1:{proxied_port}",
            args=["--bind", f"127.0.0.1:{plain_port}"],
            env={"PROXY_BIND": f"127.0.0.1:{proxied_port}"},
            wait=False,
        )
        pem = directory / "haproxy.pem"
        pem.write_text(Path(pki.server.cert).read_text() + Path(pki.server.key).read_text())
        names = ["v1", "v2", "passthrough", "terminated"]
        ports = {name: free_port() for name in names}
        backend = f"127.0.0.1:{http_port}"
        frontends = [
            Frontend(ports["v1"], backend, "send-proxy"),
            Frontend(ports["v2"], backend, "send-proxy-v2"),
            Frontend(ports["passthrough"], f"127.0.0.1:{https_port}", "send-proxy-v2"),
            Frontend(ports["terminated"], backend, "send-proxy-v2-ssl", f"ssl crt {pem}"),
        ]
        for started in (server, refusing, per_bind):
            started.wait_listening()
        with HaProxy(directory, frontends):
            yield Setup(server, http_port, https_port, refusing, per_bind, plain_port, ports)


def who(port: int, *, tls: ssl.SSLContext | None = None, source: str = CLIENT) -> dict[str, Any]:
    """GET /who from `source` over a fresh connection; the app's JSON answer."""
    connection: http.client.HTTPConnection
    if tls is None:
        connection = http.client.HTTPConnection(
            "127.0.0.1", port, timeout=10, source_address=(source, 0)
        )
    else:
        connection = http.client.HTTPSConnection(
            "127.0.0.1", port, timeout=10, source_address=(source, 0), context=tls
        )
    try:
        connection.request("GET", "/who")
        response = connection.getresponse()
        body = response.read()
        assert response.status == 200, (response.status, body)
        return dict(json.loads(body))
    finally:
        connection.close()


def exchange(port: int, data: bytes, timeout: float = 10.0) -> tuple[bytes, float]:
    """Send `data` on a raw connection; everything the server sent until it closed, and when.

    A server that closes with our bytes unread makes the kernel reset the connection: for
    the refusals that is a close like any other.
    """
    started = time.monotonic()
    received = b""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock,
        contextlib.suppress(ConnectionResetError, BrokenPipeError),
    ):
        sock.sendall(data)
        while chunk := sock.recv(65536):
            received += chunk
    return received, time.monotonic() - started


def v1(source: str = "203.0.113.7", port: int = 40000) -> bytes:
    return f"PROXY TCP4 {source} 10.0.0.1 {port} 80\r\n".encode()


def v2(source: str, tlvs: bytes = b"", command: int = 1) -> bytes:
    block = socket.inet_aton(source) + socket.inet_aton("10.0.0.1") + struct.pack("!HH", 1, 80)
    block += tlvs
    return V2_SIGNATURE + bytes([0x20 | command, 0x11]) + struct.pack("!H", len(block)) + block


REQUEST = b"GET /who HTTP/1.1\r\nHost: x\r\n\r\n"
LAST_REQUEST = b"GET /who HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def bodies(raw: bytes) -> list[dict[str, Any]]:
    """The JSON bodies of the HTTP/1.1 answers in `raw` (Content-Length framed)."""
    found = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), raw
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        found.append(json.loads(rest[:length]))
        raw = rest[length:]
    return found


# -- through HAProxy --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["v1", "v2"])
def test_haproxy_gives_the_client_address_to_the_app_and_the_access_log(
    setup: Setup, name: str
) -> None:
    answer = who(setup.haproxy[name])
    assert answer["remote_addr"] == CLIENT
    assert answer["version"] == (1 if name == "v1" else 2)
    assert answer["source"][0] == CLIENT
    assert answer["destination"] == ["127.0.0.1", setup.haproxy[name]]
    assert answer["scheme"] == "http"
    wait_for(lambda: f"{CLIENT} - - [" in setup.server.output(), 5, message="the access log line")


def test_haproxy_tls_passthrough_reads_the_header_before_the_handshake(
    setup: Setup, pki: Pki
) -> None:
    answer = who(setup.haproxy["passthrough"], tls=client_context(pki))
    assert answer["remote_addr"] == CLIENT and answer["scheme"] == "https"
    assert answer["version"] == 2


def test_haproxy_ending_tls_says_so_in_the_v2_ssl_field(setup: Setup, pki: Pki) -> None:
    answer = who(setup.haproxy["terminated"], tls=client_context(pki))
    assert answer["remote_addr"] == CLIENT
    assert answer["scheme"] == "https"  # the client's TLS ended at HAProxy
    assert answer["tls_client_ssl"] is True
    assert answer["tls_version"] in ("TLSv1.2", "TLSv1.3")


# -- raw headers ------------------------------------------------------------------------------


def test_v1_and_v2_headers_serve_keep_alive_requests(setup: Setup) -> None:
    raw, _ = exchange(setup.http_port, v1("203.0.113.7") + REQUEST + LAST_REQUEST)
    assert [body["remote_addr"] for body in bodies(raw)] == ["203.0.113.7"] * 2
    unique_id = b"\x05" + struct.pack("!H", 6) + b"abc123"
    raw, _ = exchange(setup.http_port, v2("198.51.100.9", unique_id) + LAST_REQUEST)
    (body,) = bodies(raw)
    assert body["remote_addr"] == "198.51.100.9" and body["unique_id"] == "abc123"


def test_header_split_across_packets_is_reassembled(setup: Setup) -> None:
    header = v2("198.51.100.10")
    with socket.create_connection(("127.0.0.1", setup.http_port), timeout=10) as sock:
        sock.sendall(header[:5])
        time.sleep(0.05)
        sock.sendall(header[5:] + LAST_REQUEST[:10])
        time.sleep(0.05)
        sock.sendall(LAST_REQUEST[10:])
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    assert bodies(raw)[0]["remote_addr"] == "198.51.100.10"


def test_local_command_keeps_the_real_peer(setup: Setup) -> None:
    raw, _ = exchange(setup.http_port, v2("198.51.100.9", command=0) + LAST_REQUEST)
    (body,) = bodies(raw)
    assert body["remote_addr"] == "127.0.0.1" and body["command"] == "LOCAL"


@pytest.mark.parametrize(
    ("data", "logged"),
    [
        (LAST_REQUEST, "no PROXY protocol header"),
        (b"PROXY TCP4 203.0.113.7 10.0.0.1 99999 80\r\n" + LAST_REQUEST, "port 99999 is over"),
        (V2_SIGNATURE + b"\x23\x11\x00\x00" + LAST_REQUEST, "command 3 is neither"),
    ],
)
def test_missing_or_malformed_header_closes_unanswered_and_is_logged(
    setup: Setup, data: bytes, logged: str
) -> None:
    raw, _ = exchange(setup.http_port, data)
    assert raw == b""
    wait_for(lambda: logged in setup.server.output(), 5, message=repr(logged))
    assert who(setup.haproxy["v2"])["remote_addr"] == CLIENT  # still serving


def test_an_incomplete_header_is_closed_after_header_timeout(setup: Setup) -> None:
    raw, elapsed = exchange(setup.http_port, b"PROXY TCP4 203.0.113.7")
    assert raw == b""
    assert 0.9 <= elapsed < 5.0  # header_timeout=1.0, swept every quarter second
    wait_for(lambda: "no PROXY header in time" in setup.server.output(), 5, message="log")


def test_peers_outside_proxy_allow_are_closed_unread(setup: Setup) -> None:
    raw, _ = exchange(setup.refusing.tcp[1], v1() + LAST_REQUEST)
    assert raw == b""
    wait_for(
        lambda: "127.0.0.1: not allowed to send PROXY" in setup.refusing.output(),
        5,
        message="the refusal in the log",
    )


def test_only_the_binds_listed_in_proxy_protocol_expect_the_header(setup: Setup) -> None:
    raw, _ = exchange(setup.per_bind.tcp[1], v1("203.0.113.8") + LAST_REQUEST)
    assert bodies(raw)[0]["remote_addr"] == "203.0.113.8"
    answer = who(setup.per_bind_plain_port, source="127.0.0.1")
    assert answer["remote_addr"] == "127.0.0.1" and answer["version"] is None


def test_bad_proxy_allow_is_a_usage_error() -> None:
    result = run_cli("run", f"{APP}:server", "--proxy-allow", "10.0.0.0/33")
    assert result.returncode == 2
    assert "--proxy-allow" in result.stderr and "10.0.0.0/33" in result.stderr


@pytest.mark.parametrize(
    ("frontend", "scheme", "flags"),
    [("v2", "http", ["--http2-prior-knowledge"]), ("passthrough", "https", ["--http2"])],
)
def test_http2_after_the_header_h2c_and_h2_by_alpn(
    setup: Setup, pki: Pki, frontend: str, scheme: str, flags: list[str]
) -> None:
    url = f"{scheme}://localhost:{setup.haproxy[frontend]}/who"
    result = subprocess.run(
        ["curl", "-sS", "--cacert", pki.ca, "--interface", CLIENT, "-w", "\\n%{http_version}",
         *flags, url],
        capture_output=True, text=True, timeout=20, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    body, _, version = result.stdout.rpartition("\n")
    assert version == "2"
    assert json.loads(body)["remote_addr"] == CLIENT


def test_a_malformed_bind_in_proxy_protocol_fails_at_start_in_one_line() -> None:
    result = run_cli("run", f"{APP}:misconfigured", "--bind", f"127.0.0.1:{free_port()}")
    assert result.returncode == 1
    assert "invalid bind '127.0.0.1:notaport'" in result.stderr
    assert "Traceback" not in result.stderr


def test_tls_client_hello_in_the_same_packet_as_the_header(setup: Setup, pki: Pki) -> None:
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = client_context(pki).wrap_bio(incoming, outgoing, server_hostname="localhost")
    with socket.create_connection(("127.0.0.1", setup.https_port), timeout=10) as sock:
        with pytest.raises(ssl.SSLWantReadError):
            tls.do_handshake()
        sock.sendall(v1("203.0.113.9") + outgoing.read())  # one write: header + ClientHello
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                sock.sendall(outgoing.read())
                data = sock.recv(65536)
                assert data, "the server closed during the handshake"
                incoming.write(data)
        tls.write(LAST_REQUEST)
        sock.sendall(outgoing.read())
        plain = b""
        while chunk := sock.recv(65536):
            incoming.write(chunk)
            with contextlib.suppress(ssl.SSLWantReadError, ssl.SSLZeroReturnError):
                while piece := tls.read(65536):
                    plain += piece
    (body,) = bodies(plain)
    assert body["remote_addr"] == "203.0.113.9" and body["scheme"] == "https"
