"""PROXY protocol on a TCP service: the handler sees the client's address, from raw headers
and from HAProxy in front (`send-proxy`, `send-proxy-v2`, TLS passed through)."""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.haproxy import Frontend, HaProxy
from tests.support.pki import Pki, make_pki
from tests.support.ports import free_port
from tests.support.serve import Launcher, ServerProcess
from tests.tcp.test_live import read_line

CLIENT = "127.0.0.55"  # a loopback address of its own, told apart from HAProxy's
SERVICE = "tests.tcp.services:whoami"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with Launcher(tmp_path_factory.mktemp("proxied")) as launcher:
        yield launcher(SERVICE, args=["--proxy-protocol"])


def whoami(address: tuple[str, int], preamble: bytes = b"") -> bytes:
    """The service's answer after `preamble`; b"" when it closed the connection (closed with
    our bytes unread, the kernel may say so with a reset)."""
    with socket.create_connection(address, timeout=5) as sock:
        sock.sendall(preamble)
        try:
            return read_line(sock)
        except ConnectionResetError:
            return b""


def v2_header(source: str, source_port: int) -> bytes:
    addresses = socket.inet_aton(source) + socket.inet_aton("127.0.0.1")
    body = addresses + struct.pack("!HH", source_port, 7000)
    # PROXY command, TCP over IPv4, then the address block's length.
    return b"\r\n\r\n\x00\r\nQUIT\n" + bytes([0x21, 0x11]) + struct.pack("!H", len(body)) + body


def test_a_v1_header_names_the_client(proxied: ServerProcess) -> None:
    line = b"PROXY TCP4 203.0.113.7 127.0.0.1 51000 7000\r\n"
    assert whoami(proxied.tcp, line) == b"203.0.113.7 plain -\n"


def test_a_v2_header_names_the_client(proxied: ServerProcess) -> None:
    assert whoami(proxied.tcp, v2_header("198.51.100.9", 40000)) == b"198.51.100.9 plain -\n"


def test_a_local_header_keeps_the_peer(proxied: ServerProcess) -> None:
    local = b"\r\n\r\n\x00\r\nQUIT\n" + bytes([0x20, 0x00]) + b"\x00\x00"
    assert whoami(proxied.tcp, local) == b"127.0.0.1 plain -\n"


def test_no_header_closes_the_connection_and_the_service_keeps_serving(
    proxied: ServerProcess,
) -> None:
    assert whoami(proxied.tcp, b"hello there, no header here\n") == b""
    assert whoami(proxied.tcp, b"PROXY TCP4 nonsense\r\n") == b""
    assert whoami(proxied.tcp, b"PROXY TCP4 192.0.2.1 127.0.0.1 1 2\nhello\n") == b""  # bare LF
    assert "PROXY" in proxied.output()  # the warning says why it closed
    assert whoami(proxied.tcp, v2_header("192.0.2.1", 1)) == b"192.0.2.1 plain -\n"


def test_haproxy_in_front_gives_the_client_address(
    tmp_path: Path, pki: Pki, serve: Launcher
) -> None:
    plain_port, tls_port = free_port(), free_port()
    serve(SERVICE, bind=f"127.0.0.1:{plain_port}", args=["--proxy-protocol"])
    serve(
        SERVICE,
        bind=f"127.0.0.1:{tls_port}",
        args=["--proxy-protocol", "--certfile", pki.server.cert, "--keyfile", pki.server.key],
    )
    v1, v2, passthrough = free_port(), free_port(), free_port()
    frontends = [
        Frontend(v1, f"127.0.0.1:{plain_port}", "send-proxy"),
        Frontend(v2, f"127.0.0.1:{plain_port}", "send-proxy-v2"),
        Frontend(passthrough, f"127.0.0.1:{tls_port}", "send-proxy-v2"),
    ]
    with HaProxy(tmp_path, frontends):
        for port in (v1, v2):
            with socket.create_connection(("127.0.0.1", port), 5, (CLIENT, 0)) as sock:
                assert read_line(sock) == f"{CLIENT} plain -\n".encode()
        context = ssl.create_default_context(cafile=pki.ca)
        with (
            socket.create_connection(("127.0.0.1", passthrough), 5, (CLIENT, 0)) as raw,
            context.wrap_socket(raw, server_hostname="localhost") as sock,
        ):
            assert read_line(sock).startswith(f"{CLIENT} TLSv1.3".encode())
