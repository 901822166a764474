"""WebSocket over TLS (wss://): the upgraded connection keeps using the TLS stream for both
directions, including messages spanning many TLS records and the close handshake."""

from __future__ import annotations

import os
import socket

import pytest

from tests.server.tls_clients import client_context, start
from tests.support.pki import Pki
from tests.support.serve import Launcher

websockets_client = pytest.importorskip("websockets.sync.client")
websockets_exceptions = pytest.importorskip("websockets.exceptions")

pytestmark = pytest.mark.timeout(60)


def test_wss_echo_of_text_and_a_megabyte_of_binary_then_a_clean_close(
    serve: Launcher, pki: Pki
) -> None:
    flags = ("--certfile", pki.server.cert, "--keyfile", pki.server.key)
    server = start(serve, pki, "server", flags, module="tls_ws_app").wait_serving()
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


def test_wss_reader_that_stalls_is_closed_1008_and_reads_the_close_frame_when_it_resumes(
    serve: Launcher, pki: Pki
) -> None:
    flags = ("--certfile", pki.server.cert, "--keyfile", pki.server.key)
    server = start(serve, pki, "server", flags, module="tls_ws_app").wait_serving()
    host, port = server.tcp
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window
    sock.connect((host, port))
    # The client stops reading from the socket once 4 messages wait unread in its queue, and
    # the server sends its 4,000 messages in one go: its backlog builds, then it gives up.
    url = f"wss://{host}:{port}/flood"
    context = client_context(pki)
    with websockets_client.connect(url, sock=sock, ssl=context, max_size=None, max_queue=4) as ws:
        ws.send("4000 65536")  # 250 MiB if nothing bounded the server's backlog
        received = 0
        with pytest.raises(websockets_exceptions.ConnectionClosed):
            while True:
                assert len(ws.recv(timeout=10)) == 65536
                received += 1
        assert ws.protocol.close_rcvd is not None
        assert ws.protocol.close_rcvd.code == 1008
        assert 0 < received < 4000
