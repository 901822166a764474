"""HTTP/2 over TLS as browsers get it: ALPN picks h2, and headless Chromium loads a page and
fetches an API route from it over h2, against the real `socketify run` with a test certificate.

Chromium trusts the server's key alone (`--ignore-certificate-errors-spki-list`), not every
certificate error. Without Chromium the browser test skips, or fails under
SOCKETIFY_REQUIRE_SERVICES=1; the ALPN tests need no browser and say first whether the server
offers h2 at all.
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import Iterator

import pytest

from tests.server.tls_clients import client_context
from tests.support.browser import chromium, wait_for
from tests.support.pki import Pki, spki_sha256
from tests.support.raw_client import get
from tests.support.raw_h2 import H2Client
from tests.support.serve import Launcher, ServerProcess

pytestmark = pytest.mark.timeout(90)

APP = "tests.support.apps.http2:server"


@pytest.fixture(scope="module")
def https_server(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """tests.support.apps.http2 over TLS with the test CA's server certificate, one worker."""
    certs = ("--certfile", pki.server.cert, "--keyfile", pki.server.key)
    # The run's own PYTHONPATH goes first for the server too, so `PYTHONPATH=OTHER_TREE` checks
    # another tree's server against these tests.
    env = {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    with Launcher(tmp_path_factory.mktemp("h2-tls")) as launcher:
        yield launcher(APP, args=certs, env=env, tls=client_context(pki))


def alpn_context(pki: Pki, *protocols: str) -> ssl.SSLContext:
    """A client context trusting the test CA that offers `protocols` by ALPN."""
    context = client_context(pki)
    context.set_alpn_protocols(list(protocols))
    return context


def test_tls_selects_h2_for_a_client_that_offers_it(https_server: ServerProcess, pki: Pki) -> None:
    context = alpn_context(pki, "h2", "http/1.1")
    with H2Client.connect(https_server.tcp, tls=context) as client:
        assert isinstance(client.sock, ssl.SSLSocket)
        assert client.sock.selected_alpn_protocol() == "h2"
        client.handshake()
        response = client.get("/api/protocol")
    assert response.status == 200, client.exchange()
    assert json.loads(response.body)["version"].startswith("HTTP/2"), response.body


def test_tls_keeps_http11_for_a_client_that_offers_only_that(
    https_server: ServerProcess, pki: Pki
) -> None:
    response = get(https_server.tcp, "/api/protocol", tls=alpn_context(pki, "http/1.1"))
    assert response.status == 200
    assert json.loads(response.body)["version"] == "HTTP/1.1"


# The page's own fetch() of the API route: its body and the protocol of its resource entry.
FETCH_PROTOCOL = """(async () => {
  const url = new URL('/api/protocol', location).href;
  const body = await (await fetch(url, {cache: 'no-store'})).json();
  for (let tries = 0; tries < 100; tries++) {
    const entry = performance.getEntriesByName(url).pop();
    if (entry) return {body, protocol: entry.nextHopProtocol};
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {body, protocol: null};
})()"""


def test_chromium_loads_the_page_and_its_fetch_over_h2(
    https_server: ServerProcess, pki: Pki
) -> None:
    trust = f"--ignore-certificate-errors-spki-list={spki_sha256(pki.server.cert)}"
    with chromium([trust]) as browser:
        page = browser.new_page()
        page.goto(https_server.url + "/")
        wait_for(page, "document.getElementById('status').textContent === 'loaded'", 20)
        navigation = page.evaluate(
            "(({entryType, nextHopProtocol}) => ({entryType, nextHopProtocol}))"
            "(performance.getEntries()[0])"
        )
        assert navigation == {"entryType": "navigation", "nextHopProtocol": "h2"}, (
            navigation,
            https_server.output()[-2000:],
        )
        fetched = page.evaluate(FETCH_PROTOCOL)
    assert fetched["protocol"] == "h2", fetched
    assert fetched["body"]["version"].startswith("HTTP/2"), fetched
