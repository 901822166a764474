"""Per-host routers on the real server: over TLS by the SNI name (several certificates,
HTTP/1.1 and HTTP/2), and over plain HTTP by the Host header."""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.pki import Pki, self_signed
from tests.support.ports import free_port
from tests.support.serve import Launcher, ServerProcess

pytestmark = pytest.mark.timeout(60)


@dataclass
class Hosts:
    server: ServerProcess
    https_port: int
    http_port: int
    ca: str  # the test CA (server.crt, sni.crt)
    api_ca: str  # api.crt is self-signed: its own trust anchor


@pytest.fixture(scope="module")
def hosts(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosts]:
    directory = tmp_path_factory.mktemp("hosts")
    for stem, pair in (("server", pki.server), ("sni", pki.sni)):
        shutil.copy(pair.cert, directory / f"{stem}.crt")
        shutil.copy(pair.key, directory / f"{stem}.key")
    api = self_signed(directory, "api", ["api.example.test"])
    https_port, http_port = free_port(), free_port()
    with Launcher(directory) as launcher:
        server = launcher(
            "tests.server.hosts_app:server",
            bind=f"https://127.0.0.1:{https_port}",
            args=["--bind", f"http://127.0.0.1:{http_port}"],
            env={"HOSTS_TEST_PKI": str(directory)},
            wait=False,
        )
        server.wait_listening()
        yield Hosts(server, https_port, http_port, pki.ca, api.cert)


def over_tls(
    port: int, ca: str, sni: str | None, host: str, alpn: list[str] | None = None
) -> tuple[dict[str, Any], str]:
    """GET / with SNI `sni` (None: none) and Host `host`; the answer and the cert's CN."""
    context = ssl.create_default_context(cafile=ca)
    if sni is None:
        context.check_hostname = False
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=sni) as sock,
    ):
        cert = sock.getpeercert()
        assert cert is not None
        common_name = next(v for rdn in cert["subject"] for k, v in rdn if k == "commonName")
        request = f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        sock.sendall(request.encode())
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), received
    return json.loads(body), common_name


def test_sni_picks_the_certificate_and_the_router(hosts: Hosts) -> None:
    answer, name = over_tls(hosts.https_port, hosts.api_ca, "api.example.test", "api.example.test")
    assert (answer["router"], answer["server_name"], name) == ("api", "api.example.test", name)
    assert name == "api.example.test" and answer["scheme"] == "https"
    answer, name = over_tls(hosts.https_port, hosts.ca, "sni.example.test", "sni.example.test")
    assert (answer["router"], name) == ("wildcard", "sni.example.test")
    answer, name = over_tls(hosts.https_port, hosts.ca, "localhost", "localhost")
    assert (answer["router"], answer["server_name"], name) == ("default", "localhost", "localhost")


def test_over_tls_the_sni_name_wins_over_the_host_header(hosts: Hosts) -> None:
    answer, _ = over_tls(hosts.https_port, hosts.ca, "sni.example.test", "api.example.test")
    assert answer["router"] == "wildcard"


def test_without_sni_the_host_header_picks(hosts: Hosts) -> None:
    answer, name = over_tls(hosts.https_port, hosts.ca, None, "api.example.test")
    assert (answer["router"], answer["server_name"], name) == ("api", None, "localhost")


@pytest.mark.parametrize(
    ("host", "router"),
    [("api.example.test", "api"), ("www.example.test:80", "wildcard"), ("other", "default")],
)
def test_plain_http_uses_the_host_header(hosts: Hosts, host: str, router: str) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", hosts.http_port, timeout=10)
    try:
        connection.request("GET", "/", headers={"Host": host})
        response = connection.getresponse()
        assert response.status == 200
        assert json.loads(response.read())["router"] == router
    finally:
        connection.close()


def test_http2_over_tls_routes_by_sni(hosts: Hosts) -> None:
    port = hosts.https_port
    result = subprocess.run(
        ["curl", "-sS", "--http2", "--cacert", hosts.api_ca, "-w", "\\n%{http_version}",
         "--resolve", f"api.example.test:{port}:127.0.0.1", f"https://api.example.test:{port}/"],
        capture_output=True, text=True, timeout=20, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    body, _, version = result.stdout.rpartition("\n")
    assert version == "2" and json.loads(body)["router"] == "api"
