"""Fixtures for the IO layer's tests: real `socketify run` servers, plain and TLS.

`basic_server` (one worker of tests.support.apps.basic) is shared by a module's tests. The
TLS servers are started together once per session (their boots overlap) from a throwaway
PKI; like every server the `serve` fixture starts, they are stopped with SIGTERM at the end,
and one that hangs on stop or leaves workers behind fails the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.server.tls_clients import start
from tests.support.pki import Pki, make_pki
from tests.support.serve import Launcher, ServerProcess


@pytest.fixture(scope="module")
def basic_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`socketify run tests.support.apps.basic:server --workers 1`, shared by a module."""
    with Launcher(tmp_path_factory.mktemp("basic")) as launcher:
        yield launcher()


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """CA, server, SNI, client and impostor certificates in a temporary directory."""
    return make_pki(tmp_path_factory.mktemp("pki"))


@dataclass
class Fleet:
    """The session's TLS servers."""

    https: ServerProcess  # tls_app:server: TLS 1.2+, an SNI certificate, no client certificates
    modern: ServerProcess  # tls_app:modern: TLS 1.3 only
    mtls: ServerProcess  # tls_app:plain with --certfile --keyfile --ca-file: mTLS required


@pytest.fixture(scope="session")
def fleet(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """Start every shared TLS server at once, so their boots overlap."""
    mtls_args = ("--certfile", pki.server.cert, "--keyfile", pki.server.key, "--ca-file", pki.ca)
    with Launcher(tmp_path_factory.mktemp("servers")) as launcher:
        fleet = Fleet(
            https=start(launcher, pki, "server"),
            modern=start(launcher, pki, "modern"),
            mtls=start(launcher, pki, "plain", mtls_args),
        )
        for server in (fleet.https, fleet.modern, fleet.mtls):
            assert server.wait_listening().startswith("https://"), server.output()
            server.wait_serving()
        yield fleet


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
