"""Fixtures for the helper-module tests: local HTTP, IPv6 and HTTPS servers, certificates."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from local_http import CertPair, LocalServer, make_cert


@pytest.fixture(scope="module")
def http_server() -> Iterator[LocalServer]:
    """A plain HTTP/1.1 server on 127.0.0.1."""
    server = LocalServer()
    yield server
    server.close()


def _ipv6_loopback_works() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def ipv6_server() -> Iterator[LocalServer]:
    """A plain HTTP server on [::1]; skips when this machine has no IPv6 loopback."""
    if not _ipv6_loopback_works():
        pytest.skip("IPv6 loopback (::1) is not available on this machine")
    server = LocalServer("::1")
    yield server
    server.close()


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CertPair]:
    """Self-signed certificates: `server` (localhost, 127.0.0.1, ::1), `other`, `client`."""
    directory = tmp_path_factory.mktemp("certs")
    return {
        "server": make_cert(directory, "server", ["localhost", "127.0.0.1", "::1"]),
        "other": make_cert(directory, "other", ["other.example"]),
        "client": make_cert(directory, "client", ["client.example"]),
    }


@pytest.fixture(scope="module")
def https_server(certs: dict[str, CertPair]) -> Iterator[LocalServer]:
    """An HTTPS server on 127.0.0.1 presenting the self-signed `server` certificate."""
    server = LocalServer(tls=certs["server"].server_context())
    yield server
    server.close()


def unused_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def closed_port() -> int:
    return unused_port()


@pytest.fixture
def cert_dir(certs: dict[str, CertPair]) -> Path:
    return certs["server"].cert.parent
