"""Helpers for the TLS tests: verifying client contexts, one-shot HTTPS requests, and
starting `tests/tls/tls_app.py` servers with the integration tests' launcher.

Test modules import this (never `conftest`, whose module name another folder's conftest can
take in sys.modules when the whole tree is collected).
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from pathlib import Path
from typing import Any

from integration_support import Launcher, ServerProcess  # on sys.path: see conftest.py
from pki import Pki

HERE = Path(__file__).resolve().parent

WORKERS = 2


def common_name(cert: dict[str, Any]) -> str:
    """The CN of a certificate as `getpeercert()` returns it."""
    return next(value for rdn in cert["subject"] for key, value in rdn if key == "commonName")


def client_context(
    pki: Pki, *, client: bool = False, version: ssl.TLSVersion | None = None
) -> ssl.SSLContext:
    """A verifying client context trusting the test CA; `client` presents the CA-signed cert."""
    context = ssl.create_default_context(cafile=pki.ca)
    if client:
        context.load_cert_chain(pki.client.cert, pki.client.key)
    if version is not None:
        context.minimum_version = context.maximum_version = version
    return context


def https_get(
    server: ServerProcess, context: ssl.SSLContext, target: str = "/ping", timeout: float = 5.0
) -> bytes:
    """GET `target` over a fresh TLS connection (http.client); returns the body of a 200."""
    host, port = server.tcp
    connection = http.client.HTTPSConnection(host, port, context=context, timeout=timeout)
    try:
        connection.request("GET", target)
        response = connection.getresponse()
        body = response.read()
        assert response.status == 200, (response.status, body)
        return body
    finally:
        connection.close()


def tls_connect(
    server: ServerProcess,
    context: ssl.SSLContext,
    server_hostname: str = "127.0.0.1",
    timeout: float = 5.0,
) -> ssl.SSLSocket:
    """A blocking TLS client socket with the handshake done (raises if it fails)."""
    sock = socket.create_connection(server.tcp, timeout=timeout)
    try:
        return context.wrap_socket(sock, server_hostname=server_hostname)
    except BaseException:
        sock.close()
        raise


def server_env(pki: Pki, **extra: str) -> dict[str, str]:
    """The environment of a tls_app server: where the certificates are, and this folder."""
    return {"TLS_TEST_PKI": str(Path(pki.ca).parent), "PYTHONPATH": str(HERE), **extra}


def start(
    launcher: Launcher,
    pki: Pki,
    app: str,
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    workers: int = WORKERS,
    module: str = "tls_app",
) -> ServerProcess:
    """Launch `socketify run <module>:<app> --workers 2 ARGS` from this folder, not waiting."""
    environment = server_env(pki, **(env or {}))
    return launcher(f"{module}:{app}", workers=workers, args=args, env=environment, wait=False)


def wait_serving(server: ServerProcess, pki: Pki, timeout: float = 15.0) -> ServerProcess:
    """Wait for the `listening on https://` line, then for a GET /ping over TLS to succeed."""
    assert server.wait_listening(timeout).startswith("https://"), server.output()
    deadline = time.monotonic() + timeout
    while True:
        try:
            https_get(server, client_context(pki, client=True), timeout=2.0)
            return server
        except (OSError, AssertionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
