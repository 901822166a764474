"""Fixtures for the TLS tests: a throwaway PKI and real `socketify run --workers 2` servers.

The servers are started together once per session (their boots overlap) and stopped with
SIGTERM at the end; a server that hangs on stop or leaves workers behind fails the run, as in
tests/integration, whose launcher this reuses (see tls_support).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# The launcher and wire helpers of the integration tests: their folder is a rootdir of its
# own (no __init__.py), so it is only on sys.path when pytest collects tests from it.
_INTEGRATION = str(Path(__file__).resolve().parent.parent / "integration")
if _INTEGRATION not in sys.path:
    sys.path.insert(0, _INTEGRATION)

from integration_support import Launcher, ServerProcess  # noqa: E402
from pki import Pki, make_pki  # noqa: E402
from tls_support import start, wait_serving  # noqa: E402


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """CA, server, SNI, client and impostor certificates in a temporary directory."""
    return make_pki(tmp_path_factory.mktemp("pki"))


@dataclass
class Fleet:
    """The session's servers."""

    https: ServerProcess  # tls_app:server: TLS 1.2+, an SNI certificate, no client certificates
    modern: ServerProcess  # tls_app:modern: TLS 1.3 only
    mtls: ServerProcess  # tls_app:plain with --certfile --keyfile --ca-file: mTLS required


@pytest.fixture(scope="session")
def fleet(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """Start every shared server at once, so their boots overlap."""
    launcher = Launcher(tmp_path_factory.mktemp("servers"))
    mtls_args = ("--certfile", pki.server.cert, "--keyfile", pki.server.key, "--ca-file", pki.ca)
    fleet = Fleet(
        https=start(launcher, pki, "server"),
        modern=start(launcher, pki, "modern"),
        mtls=start(launcher, pki, "plain", mtls_args),
    )
    try:
        for server in (fleet.https, fleet.modern, fleet.mtls):
            wait_serving(server, pki)
        yield fleet
    finally:
        problems = launcher.stop_all()
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def https_server(fleet: Fleet) -> ServerProcess:
    """HTTPS (TLS 1.2 and 1.3) with an SNI certificate for SNI_HOST; 2 workers."""
    return fleet.https


@pytest.fixture
def modern_server(fleet: Fleet) -> ServerProcess:
    """Like https_server, with min_version="TLSv1.3"."""
    return fleet.modern


@pytest.fixture
def mtls_server(fleet: Fleet) -> ServerProcess:
    """tls_app:plain given TLS and `client_auth="required"` by the command line."""
    return fleet.mtls


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Launcher]:
    """A launcher for servers of one test; each is SIGTERMed at teardown."""
    launcher = Launcher(tmp_path)
    yield launcher
    problems = launcher.stop_all()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
