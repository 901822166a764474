"""http_client over HTTPS: certificates are verified unless the caller says otherwise."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3

from socketify import http_client
from socketify.http_client import Client
from tests.http_client.local_http import LocalServer
from tests.support.pki import Pair


def test_self_signed_certificate_is_refused_by_default(https_server: LocalServer) -> None:
    before = len(https_server.seen)
    response = http_client.get(https_server.url + "/echo")
    assert response.status == 0
    assert response.error.startswith("TLS handshake failed")
    assert "self-signed" in response.error or "verify failed" in response.error
    assert len(https_server.seen) == before  # nothing was sent over the unverified link


def test_ca_file_pointing_at_the_certificate_is_trusted(
    https_server: LocalServer, certs: dict[str, Pair]
) -> None:
    response = http_client.get(https_server.url + "/echo", ca_file=str(certs["server"].cert))
    assert response.status == 200
    assert response.json()["headers"]  # a real answer came back


def test_verify_with_a_path_is_a_ca_bundle(
    https_server: LocalServer, certs: dict[str, Pair]
) -> None:
    response = http_client.get(https_server.url + "/echo", verify=str(certs["server"].cert))
    assert response.status == 200


def test_verify_with_a_directory_of_hashed_certs(
    https_server: LocalServer, certs: dict[str, Pair], tmp_path: Path
) -> None:
    import subprocess

    cert = certs["server"].cert
    openssl_hash = subprocess.run(
        ["openssl", "x509", "-hash", "-noout", "-in", str(cert)],
        capture_output=True,
        text=True,
        check=False,
    )
    if openssl_hash.returncode != 0:
        pytest.skip("the openssl command is needed to name a CA directory entry")
    (tmp_path / f"{openssl_hash.stdout.strip()}.0").write_bytes(Path(cert).read_bytes())
    assert http_client.get(https_server.url + "/echo", verify=str(tmp_path)).status == 200


def test_localhost_name_matches_the_certificate(
    https_server: LocalServer, certs: dict[str, Pair]
) -> None:
    url = f"https://localhost:{https_server.port}/echo"
    assert http_client.get(url, ca_file=str(certs["server"].cert)).status == 200


def test_trusted_certificate_for_another_name_is_refused(
    certs: dict[str, Pair],
) -> None:
    server = LocalServer(tls=certs["other"].server_context())
    try:
        response = http_client.get(server.url + "/echo", ca_file=str(certs["other"].cert))
    finally:
        server.close()
    assert response.status == 0
    assert response.error.startswith("TLS handshake failed")
    assert "mismatch" in response.error.lower() or "not valid" in response.error.lower()


def test_verify_false_accepts_any_certificate_with_a_warning(https_server: LocalServer) -> None:
    with pytest.warns(urllib3.exceptions.InsecureRequestWarning):
        response = http_client.get(https_server.url + "/echo", verify=False)
    assert response.status == 200


def test_verify_false_with_a_ca_file_is_contradictory(certs: dict[str, Pair]) -> None:
    with pytest.raises(ValueError):
        Client(verify=False, ca_file=str(certs["server"].cert))


def test_missing_ca_file_fails_at_construction(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        Client(ca_file=str(tmp_path / "nope.pem"))


def test_https_host_header_and_pooling(https_server: LocalServer, certs: dict[str, Pair]) -> None:
    with Client(ca_file=str(certs["server"].cert)) as client:
        first = client.get(https_server.url + "/echo").json()
        second = client.get(https_server.url + "/echo").json()
    host = {name.lower(): value for name, value in first["headers"]}["host"]
    assert host == f"127.0.0.1:{https_server.port}"
    assert first["client_port"] == second["client_port"]


@pytest.fixture(scope="module")
def mtls_server(certs: dict[str, Pair]) -> Iterator[LocalServer]:
    context = certs["server"].server_context(client_ca=certs["client"].cert)
    server = LocalServer(tls=context)
    yield server
    server.close()


def test_client_certificate_is_presented_when_configured(
    mtls_server: LocalServer, certs: dict[str, Pair]
) -> None:
    ca = str(certs["server"].cert)
    client_pair = certs["client"]
    with Client(ca_file=ca, cert_file=str(client_pair.cert), key_file=str(client_pair.key)) as c:
        assert c.get(mtls_server.url + "/echo").status == 200
    with Client(ca_file=ca) as anonymous:
        response = anonymous.get(mtls_server.url + "/echo")
    assert response.status == 0
