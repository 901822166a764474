"""Pulse channels read by the worker's shared `Readers` dispatcher (socketify.server.upgraded).

On plain TCP without `idle_timeout` every channel's input is read and dispatched by one
dispatcher greenlet per loop turn. These tests pin what that must not change: a callback
that blocks (cooperatively) holds up only its own channel, whose later messages wait and
keep their order; several channels may block at once; the close handshake, callback errors
and the end of the connection still work when the peer acts while a callback is blocked.
They run in-process (`TestClient`), over a socket pair, on the same code path as a worker.
"""

from __future__ import annotations

import socket

import gevent
import pytest
from gevent.event import Event

from socketify import Request, Response, Server
from socketify.realtime import pulse
from socketify.server.upgraded import Readers, readers
from socketify.testing import TestClient
from socketify.testing.realtime import WebSocketClosed
from tests.support.raw_websocket import close_frame

pytestmark = pytest.mark.timeout(30)


def make_server() -> tuple[Server, Event, list[tuple[str, int]]]:
    """`/gate`: "wait" blocks until some channel sends "open"; everything else is echoed."""
    server = Server()
    gate = Event()
    closes: list[tuple[str, int]] = []

    @server.get("/gate")
    def gated(req: Request, res: Response) -> None:
        ch = pulse.upgrade(req, res)
        if ch is None:
            return
        name = req.query.get("name", "?")

        def on_text(ch: pulse.Channel, text: str) -> None:
            if text == "wait":
                gate.wait(10)  # blocks this channel's callback, cooperatively
                ch.send_text("released" if gate.is_set() else "timed out")
            elif text == "open":
                gate.set()
                ch.send_text("opened")
            elif text == "fail":
                raise RuntimeError("callback failed on purpose")
            else:
                ch.send_text(text)

        ch.on_text(on_text)
        ch.on_close(lambda ch, code, reason: closes.append((name, code)))

    return server, gate, closes


def test_a_blocked_callback_holds_up_only_its_own_channel() -> None:
    server, gate, _ = make_server()
    client = TestClient(server)
    with client.websocket("/gate?name=a") as a, client.websocket("/gate?name=b") as b:
        a.send_text("wait")
        b.send_text("ping")  # served while a's callback is still blocked
        assert b.receive_text() == "ping"
        assert not gate.is_set()
        b.send_text("open")
        assert b.receive_text() == "opened"
        assert a.receive_text() == "released"


def test_messages_behind_a_blocked_callback_wait_and_keep_their_order() -> None:
    server, _, _ = make_server()
    client = TestClient(server)
    with client.websocket("/gate?name=a") as a, client.websocket("/gate?name=b") as b:
        a.send_text("wait")
        b.send_text("x")  # once b is answered, a's callback is surely blocked
        assert b.receive_text() == "x"
        for n in range(5):
            a.send_text(str(n))  # arrive while a is blocked: nobody may read them yet
        b.send_text("y")
        assert b.receive_text() == "y"
        b.send_text("open")
        assert b.receive_text() == "opened"
        assert [a.receive_text() for _ in range(6)] == ["released", "0", "1", "2", "3", "4"]
        a.send_text("after")  # a is back in the shared set
        assert a.receive_text() == "after"


def test_many_channels_may_block_at_once() -> None:
    server, _, _ = make_server()
    client = TestClient(server)
    sessions = [client.websocket(f"/gate?name={n}") for n in range(6)]
    try:
        for ws in sessions[:5]:
            ws.send_text("wait")
            ws.send_text("then")
        opener = sessions[5]
        opener.send_text("open")
        assert opener.receive_text() == "opened"
        for ws in sessions[:5]:
            assert [ws.receive_text(), ws.receive_text()] == ["released", "then"]
    finally:
        for ws in sessions:
            ws.close()


def test_peer_close_during_a_blocked_callback_completes_the_handshake() -> None:
    server, _, closes = make_server()
    client = TestClient(server)
    with client.websocket("/gate?name=a") as a, client.websocket("/gate?name=b") as b:
        a.send_text("wait")
        a.send_frame(close_frame(4001, b"bye"))
        b.send_text("open")
        assert b.receive_text() == "opened"
        assert a.receive_text() == "released"  # the message before the close is answered
        with pytest.raises(WebSocketClosed) as closed:
            a.receive_text()
        assert closed.value.code == 4001
    assert ("a", 4001) in closes


def test_a_failing_callback_closes_its_channel_with_1011_and_others_carry_on() -> None:
    server, _, closes = make_server()
    client = TestClient(server)
    with client.websocket("/gate?name=a") as a, client.websocket("/gate?name=b") as b:
        a.send_text("fail")
        with pytest.raises(WebSocketClosed) as closed:
            a.receive_text()
        assert closed.value.code == 1011
        b.send_text("still here")
        assert b.receive_text() == "still here"
    assert ("a", 1011) in closes


def test_readers_park_a_blocked_handler_and_put_it_back_when_it_returns() -> None:
    loop = Readers(gevent.get_hub())
    gate = Event()
    seen: list[tuple[str, bytes]] = []
    left, left_peer = socket.socketpair()
    right, right_peer = socket.socketpair()
    for sock in (left, right):
        sock.setblocking(False)

    def reader(name: str, sock: socket.socket) -> None:
        def handler() -> None:
            try:
                data = sock.recv(1)  # one byte per call: the rest stays readable
            except BlockingIOError:
                return
            seen.append((name, data))
            if data == b"w":
                gate.wait(10)

        loop.watch(sock.fileno(), handler)

    reader("left", left)
    reader("right", right)
    try:
        left_peer.sendall(b"w12")
        gevent.sleep(0.05)
        right_peer.sendall(b"r")
        gevent.sleep(0.05)
        # left blocked on "w": its other bytes wait, right is served meanwhile.
        assert seen == [("left", b"w"), ("right", b"r")]
        gate.set()
        gevent.sleep(0.05)
        assert seen[2:] == [("left", b"1"), ("left", b"2")]
    finally:
        for sock in (left, right):
            loop.unwatch(sock.fileno())
        for sock in (left, left_peer, right, right_peer):
            sock.close()


def test_readers_belong_to_the_hub_and_process() -> None:
    assert readers() is readers()
