"""Fixtures for the http_client tests: local HTTP, IPv6 and HTTPS servers, certificates."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.http_client.local_http import LocalServer
from tests.support.pki import Pair, self_signed
from tests.support.ports import free_port, ipv6_loopback


@pytest.fixture(scope="module")
def http_server() -> Iterator[LocalServer]:
    """A plain HTTP/1.1 server on 127.0.0.1."""
    server = LocalServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def ipv6_server() -> Iterator[LocalServer]:
    """A plain HTTP server on [::1]; skips when this machine has no IPv6 loopback."""
    if not ipv6_loopback():
        pytest.skip("IPv6 loopback (::1) is not available on this machine")
    server = LocalServer("::1")
    yield server
    server.close()


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Pair]:
    """Self-signed certificates: `server` (localhost, 127.0.0.1, ::1), `other`, `client`."""
    directory = tmp_path_factory.mktemp("certs")
    return {
        "server": self_signed(directory, "server", ["localhost", "127.0.0.1", "::1"]),
        "other": self_signed(directory, "other", ["other.example"]),
        "client": self_signed(directory, "client", ["client.example"]),
    }


@pytest.fixture(scope="module")
def https_server(certs: dict[str, Pair]) -> Iterator[LocalServer]:
    """An HTTPS server on 127.0.0.1 presenting the self-signed `server` certificate."""
    server = LocalServer(tls=certs["server"].server_context())
    yield server
    server.close()


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on."""
    return free_port()


@pytest.fixture
def cert_dir(certs: dict[str, Pair]) -> Path:
    return Path(certs["server"].cert).parent
