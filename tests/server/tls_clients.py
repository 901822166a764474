"""Clients of the TLS tests, and `start` for the servers they talk to (tls_app.py, tls_ws_app.py).

Test modules import this (never `conftest`): verifying client contexts trusting the test CA,
one-shot HTTPS requests with http.client.
"""

from __future__ import annotations

import http.client
import ssl
from pathlib import Path
from typing import Any

from tests.support.pki import Pki
from tests.support.serve import Launcher, ServerProcess

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


def server_env(pki: Pki, **extra: str) -> dict[str, str]:
    """The environment of a tls_app server: where the certificates are."""
    return {"TLS_TEST_PKI": str(Path(pki.ca).parent), **extra}


def start(
    launcher: Launcher,
    pki: Pki,
    app: str,
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    workers: int = WORKERS,
    module: str = "tls_app",
) -> ServerProcess:
    """Launch `socketify run tests.server.<module>:<app> --workers 2 ARGS`, not waiting:
    `server.wait_serving()` waits for it, probing over TLS with the CA-signed client cert."""
    return launcher(
        f"tests.server.{module}:{app}",
        workers=workers,
        args=args,
        env=server_env(pki, **(env or {})),
        tls=client_context(pki, client=True),
        wait=False,
    )
