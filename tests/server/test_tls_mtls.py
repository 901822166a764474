"""Client certificates (mTLS) with `socketify run --certfile --keyfile --ca-file`: a CA-signed
client gets in and the handler sees it as `req.client_cert`; no certificate or a self-signed
one fails the handshake (with an alert saying why) and the workers keep serving."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess

import pytest

from tests.server.tls_clients import client_context, https_get
from tests.support.pki import CLIENT_NAME, Pki
from tests.support.raw_client import connect
from tests.support.serve import ServerProcess

pytestmark = pytest.mark.timeout(60)

VERSIONS = [ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2]


def refused(server: ServerProcess, context: ssl.SSLContext) -> str:
    """Try a request; return the TLS error the client got (fails if a response came)."""
    try:
        # TLS 1.3 clients finish their side of the handshake before the server has checked
        # their certificate, so the refusal may only show on the first read.
        with connect(server.address, tls=context) as sock:
            sock.sendall(b"GET /whoami HTTP/1.1\r\nHost: test\r\n\r\n")
            data = sock.recv(4096)
    except (ssl.SSLError, ConnectionError) as exc:
        return str(exc)
    raise AssertionError(f"the server answered a client it should refuse: {data!r}")


@pytest.mark.parametrize("version", VERSIONS)
def test_ca_signed_client_certificate_reaches_the_handler_as_client_cert(
    mtls_server: ServerProcess, pki: Pki, version: ssl.TLSVersion
) -> None:
    body = https_get(mtls_server, client_context(pki, client=True, version=version), "/whoami")
    assert json.loads(body)["client"] == CLIENT_NAME
    assert json.loads(body)["scheme"] == "https"


@pytest.mark.parametrize("version", VERSIONS)
def test_client_without_a_certificate_is_refused_with_certificate_required(
    mtls_server: ServerProcess, pki: Pki, version: ssl.TLSVersion
) -> None:
    error = refused(mtls_server, client_context(pki, version=version))
    # TLS 1.3 has a dedicated alert; TLS 1.2 reports a handshake failure.
    assert "CERTIFICATE_REQUIRED" in error or "HANDSHAKE_FAILURE" in error, error


@pytest.mark.parametrize("version", VERSIONS)
def test_self_signed_client_certificate_is_refused_as_unknown_ca(
    mtls_server: ServerProcess, pki: Pki, version: ssl.TLSVersion
) -> None:
    context = client_context(pki, version=version)
    context.load_cert_chain(pki.rogue.cert, pki.rogue.key)
    assert "UNKNOWN_CA" in refused(mtls_server, context)


def test_refused_handshakes_cost_nothing_else(mtls_server: ServerProcess, pki: Pki) -> None:
    workers = mtls_server.workers()
    assert len(workers) == 2
    good = client_context(pki, client=True)
    with connect(
        mtls_server.address, tls=good
    ) as keeper:  # an established client, mid-conversation
        rogue = client_context(pki)
        rogue.load_cert_chain(pki.rogue.cert, pki.rogue.key)
        for _ in range(10):
            refused(mtls_server, client_context(pki))
            refused(mtls_server, rogue)
        keeper.sendall(b"GET /whoami HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := keeper.recv(4096):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200 OK")
        assert CLIENT_NAME.encode() in answer
    pids = {json.loads(https_get(mtls_server, good, "/whoami"))["pid"] for _ in range(20)}
    assert pids <= set(workers)
    assert mtls_server.workers() == workers  # no worker died
    assert "Traceback" not in mtls_server.output()
    assert "Exception ignored" not in mtls_server.output()


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_with_and_without_a_client_certificate(mtls_server: ServerProcess, pki: Pki) -> None:
    host, port = mtls_server.tcp
    url = f"https://{host}:{port}/whoami"
    base = ["curl", "-sS", "--max-time", "10", "--cacert", pki.ca, url]
    with_cert = [*base, "--cert", pki.client.cert, "--key", pki.client.key]
    accepted = subprocess.run(with_cert, capture_output=True, text=True, timeout=15)
    assert accepted.returncode == 0, accepted.stderr
    assert json.loads(accepted.stdout)["client"] == CLIENT_NAME
    rejected = subprocess.run(base, capture_output=True, text=True, timeout=15)
    assert rejected.returncode != 0
    # Over h2 (which ALPN picks) curl reports only the broken connection; over HTTP/1.1 it
    # names the alert the server sent.
    rejected = subprocess.run([*base, "--http1.1"], capture_output=True, text=True, timeout=15)
    assert rejected.returncode != 0
    assert "alert certificate required" in rejected.stderr, rejected.stderr
