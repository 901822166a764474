"""examples/https_hello.py: a throwaway self-signed certificate, then HTTPS to 2 real workers."""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import json
import os
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from examples.https_hello import tls_options
from socketify.core.tls_options import TlsOptions
from socketify.testing import LiveServer

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]
APP = "examples.https_hello:server"


def self_signed(directory: Path, stem: str = "server") -> tuple[Path, Path]:
    """What the docstring's `openssl req -x509` makes: a self-signed localhost certificate."""
    key = ec.generate_private_key(ec.SECP256R1())  # quicker to make than RSA-2048
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


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


def test_server_crt_in_the_working_directory_serves_https_on_two_workers(tmp_path: Path) -> None:
    cert, _ = self_signed(tmp_path)
    env = {"PYTHONPATH": str(REPO), "SOCKETIFY_CERT_FILE": "", "SOCKETIFY_KEY_FILE": ""}
    with LiveServer(APP, workers=2, cwd=str(tmp_path), env=env) as server:
        for _ in range(4):  # fresh connections: both workers answer
            assert https_get(server.port, cert) == (200, {"secure": True, "client": "127.0.0.1"})
        # Plain HTTP on the TLS port gets no answer in the clear.
        plain = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        with pytest.raises((http.client.HTTPException, OSError)):
            plain.request("GET", "/")
            plain.getresponse()
        plain.close()


def test_without_a_certificate_the_server_refuses_to_start(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SOCKETIFY_CERT_FILE", None)
    env.pop("SOCKETIFY_KEY_FILE", None)
    command = [sys.executable, "-m", "socketify.cli", "run", APP, "--bind", "127.0.0.1:0"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, timeout=30)
    assert done.returncode != 0
    assert b"server.crt" in done.stderr
