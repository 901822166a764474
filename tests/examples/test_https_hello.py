"""examples/https_hello.py: a throwaway self-signed certificate, then HTTPS to 2 real workers."""

from __future__ import annotations

import http.client
import json
import ssl
from pathlib import Path

import pytest

from examples.https_hello import tls_options
from socketify.core.tls_options import TlsOptions
from tests.support.pki import self_signed
from tests.support.serve import Launcher, run_cli

pytestmark = pytest.mark.timeout(60)

APP = "examples.https_hello:server"


def https_get(port: int, cafile: Path) -> tuple[int, object]:
    """GET / over a verified TLS connection to localhost:`port`."""
    context = ssl.create_default_context(cafile=str(cafile))
    connection = http.client.HTTPSConnection("localhost", port, context=context, timeout=5)
    try:
        connection.request("GET", "/")
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        connection.close()


def test_the_environment_wins_over_the_files_in_the_working_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SOCKETIFY_CERT_FILE", raising=False)
    monkeypatch.delenv("SOCKETIFY_KEY_FILE", raising=False)
    assert tls_options() == TlsOptions(cert_file="server.crt", key_file="server.key")
    monkeypatch.setenv("SOCKETIFY_CERT_FILE", "/etc/site.crt")
    assert tls_options().cert_file == "server.crt"  # both are needed
    monkeypatch.setenv("SOCKETIFY_KEY_FILE", "/etc/site.key")
    assert tls_options() == TlsOptions(cert_file="/etc/site.crt", key_file="/etc/site.key")


def test_server_crt_in_the_working_directory_serves_https_on_two_workers(
    serve: Launcher, tmp_path: Path
) -> None:
    # What the docstring's `openssl req -x509` makes: a self-signed localhost certificate.
    cert = self_signed(tmp_path, "server", ["localhost", "127.0.0.1"]).cert
    env = {"SOCKETIFY_CERT_FILE": "", "SOCKETIFY_KEY_FILE": ""}
    tls = ssl.create_default_context(cafile=cert)
    with serve(APP, workers=2, cwd=tmp_path, env=env, tls=tls) as server:
        for _ in range(4):  # fresh connections: both workers answer
            assert https_get(server.port, cert) == (200, {"secure": True, "client": "127.0.0.1"})
        # Plain HTTP on the TLS port gets no answer in the clear.
        plain = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        with pytest.raises((http.client.HTTPException, OSError)):
            plain.request("GET", "/")
            plain.getresponse()
        plain.close()


def test_without_a_certificate_the_server_refuses_to_start(tmp_path: Path) -> None:
    env = {"SOCKETIFY_CERT_FILE": "", "SOCKETIFY_KEY_FILE": ""}
    done = run_cli("run", APP, "--bind", "127.0.0.1:0", cwd=tmp_path, env=env, timeout=30)
    assert done.returncode != 0
    assert "server.crt" in done.stderr
