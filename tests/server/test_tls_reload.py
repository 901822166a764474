"""Certificate renewal without downtime: workers build their TLS context when they start, so
SIGHUP (new workers, then the old ones drain) serves renewed files; a broken renewal fails
the reload only, and the old workers keep serving the old certificate."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest

from tests.server.tls_clients import client_context, common_name, start
from tests.support.pki import SNI_HOST, Pki
from tests.support.raw_client import connect
from tests.support.serve import Launcher, ServerProcess
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(60)


def served_name(server: ServerProcess, pki: Pki) -> str:
    """The CN of the certificate the server presents (chain verified, name not checked)."""
    context = client_context(pki)
    context.check_hostname = False  # the renewed certificate names SNI_HOST only
    with connect(server.address, tls=context, server_hostname="127.0.0.1") as sock:
        cert = sock.getpeercert()
        assert cert is not None
        return common_name(cert)


def test_sighup_serves_renewed_certificate_files_and_survives_a_broken_renewal(
    serve: Launcher, pki: Pki, tmp_path: Path
) -> None:
    cert, key = tmp_path / "live.crt", tmp_path / "live.key"
    shutil.copy(pki.server.cert, cert)
    shutil.copy(pki.server.key, key)
    server = start(serve, pki, "plain", ("--certfile", str(cert), "--keyfile", str(key)))
    server.wait_serving()
    assert served_name(server, pki) == "localhost"

    # A renewal: both files replaced (the SNI pair stands in for a new certificate).
    shutil.copy(pki.sni.cert, cert)
    shutil.copy(pki.sni.key, key)
    server.signal(signal.SIGHUP)
    wait_for(lambda: "reload complete" in server.output(), 10, message="the reload")
    assert served_name(server, pki) == SNI_HOST

    # A botched renewal: a certificate without its key. The reload fails, service goes on.
    workers = server.workers()
    shutil.copy(pki.server.cert, cert)
    server.signal(signal.SIGHUP)
    wait_for(lambda: "reload failed" in server.output(), 10, message="the failed reload")
    assert "KEY_VALUES_MISMATCH" in server.output()
    # The new generation's other worker is being stopped; the old ones are all still there.
    wait_for(lambda: server.workers() == workers, 5, message="only the old workers")
    assert served_name(server, pki) == SNI_HOST
