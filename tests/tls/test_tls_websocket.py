"""WebSocket over TLS (wss://): the upgraded connection keeps using the TLS stream for both
directions, including messages spanning many TLS records and the close handshake."""

from __future__ import annotations

import os

import pytest
from integration_support import Launcher
from pki import Pki
from tls_support import client_context, start, wait_serving

websockets_client = pytest.importorskip("websockets.sync.client")

pytestmark = pytest.mark.timeout(60)


def test_wss_echo_of_text_and_a_megabyte_of_binary_then_a_clean_close(
    serve: Launcher, pki: Pki
) -> None:
    flags = ("--certfile", pki.server.cert, "--keyfile", pki.server.key)
    server = wait_serving(start(serve, pki, "server", flags, module="tls_ws_app"), pki)
    host, port = server.tcp
    with websockets_client.connect(f"wss://{host}:{port}/ws", ssl=client_context(pki)) as ws:
        ws.send("hello over tls")
        assert ws.recv(timeout=5) == "HELLO OVER TLS"
        payload = os.urandom(1 << 20)  # 64+ TLS records each way
        ws.send(payload)
        assert ws.recv(timeout=5) == payload
        ws.close()
        assert ws.protocol.close_rcvd is not None
        assert ws.protocol.close_rcvd.code == 1000
