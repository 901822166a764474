"""Pulse against `socketify run --workers 2` with the `websockets` client and raw sockets."""

from __future__ import annotations

import contextlib
import socket
import uuid

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.realtime.realtime_client import SseClient
from tests.support.serve import ServerProcess


def _ws(live: ServerProcess, target: str, **kwargs: object) -> ClientConnection:
    return connect(f"ws://127.0.0.1:{live.port}{target}", open_timeout=5, **kwargs)  # type: ignore[arg-type]


def _closes_watcher(live: ServerProcess) -> SseClient:
    """An SSE subscription to the room where the app reports each channel's on_close."""
    watcher = SseClient(live.port, "/watch?room=closes")
    assert watcher.next_data_event().event == "hello"
    return watcher


def _reported_close(watcher: SseClient, token: str) -> str:
    while True:
        line = watcher.next_data_event().data[0]
        if line.startswith(f"{token}:"):
            return line[len(token) + 1 :]


def test_pulse_echoes_text_binary_and_answers_pings(live: ServerProcess) -> None:
    with _ws(live, "/echo", subprotocols=["chat"]) as ws:
        assert ws.subprotocol == "chat"
        ws.send("héllo")
        assert ws.recv(timeout=5) == "héllo"
        ws.send(b"\x00\xff" * 100)
        assert ws.recv(timeout=5) == b"\x00\xff" * 100
        assert ws.ping(b"abc").wait(5)


def test_pulse_server_close_reaches_client_and_on_close_gets_the_server_code(
    live: ServerProcess,
) -> None:
    watcher = _closes_watcher(live)
    token = uuid.uuid4().hex
    try:
        with _ws(live, f"/echo?token={token}") as ws:
            ws.send("close:4001")
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=5)
            assert closed.value.rcvd is not None
            assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4001, "bye")
        assert _reported_close(watcher, token) == "4001:bye"
    finally:
        watcher.close()


def test_pulse_client_close_code_is_echoed_and_reported(live: ServerProcess) -> None:
    watcher = _closes_watcher(live)
    token = uuid.uuid4().hex
    try:
        with _ws(live, f"/echo?token={token}") as ws:
            ws.close(4002, "client done")
            assert ws.close_code == 4002  # the server echoed our code
        assert _reported_close(watcher, token) == "4002:client done"
    finally:
        watcher.close()


def test_pulse_message_over_the_limit_closes_with_1009(live: ServerProcess) -> None:
    watcher = _closes_watcher(live)
    token = uuid.uuid4().hex
    try:
        with _ws(live, f"/echo?token={token}") as ws:
            ws.send("x" * 5000)  # the route allows 4096 bytes per message
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=5)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
        assert _reported_close(watcher, token).startswith("1009:")
    finally:
        watcher.close()


def test_pulse_peer_vanishing_reports_1006(live: ServerProcess) -> None:
    watcher = _closes_watcher(live)
    token = uuid.uuid4().hex
    try:
        with _ws(live, f"/echo?token={token}") as ws:
            _vanish(ws)
        assert _reported_close(watcher, token) == "1006:"
    finally:
        watcher.close()


def _vanish(ws: ClientConnection) -> None:
    ws.socket.shutdown(socket.SHUT_RDWR)  # TCP ends without a close frame


@pytest.mark.parametrize(
    ("extra", "status"),
    [
        ("", 426),  # a plain GET
        (
            "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 8\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
            426,
        ),
        ("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n", 400),
    ],
)
def test_pulse_refused_upgrades_get_an_http_answer(
    live: ServerProcess, extra: str, status: int
) -> None:
    with socket.create_connection(("127.0.0.1", live.port), timeout=5) as sock:
        sock.sendall(f"GET /echo HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode())
        head = sock.recv(65536).decode("latin-1")
    assert head.startswith(f"HTTP/1.1 {status} ")
    if status == 426:
        assert "Sec-WebSocket-Version: 13" in head


def test_an_upgrade_whose_body_cannot_be_dropped_is_refused_not_switched(
    live: ServerProcess,
) -> None:
    # Unread body bytes would otherwise be taken for WebSocket frames after the switch.
    request = (
        "GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        f"Content-Length: {8 << 20}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", live.port), timeout=5) as sock:
        sock.sendall(request.encode() + b"\x81\x85" + bytes(9))  # a frame-like start of body
        head = sock.recv(65536).decode("latin-1")
    assert head.startswith("HTTP/1.1 400 "), head
    assert "Connection: close" in head
    with _ws(live, "/echo") as ws:  # the worker serves on
        ws.send("still here")
        assert ws.recv(timeout=5) == "still here"


def test_server_ws_shorthand_calls_open_and_message(live: ServerProcess) -> None:
    with _ws(live, "/ws") as ws:
        assert ws.recv(timeout=5) == "welcome"
        ws.send("shout")
        assert ws.recv(timeout=5) == "SHOUT"
        ws.send(b"\x01\x02")
        assert ws.recv(timeout=5) == b"\x01\x02"


def test_hub_room_spanning_both_workers_gets_every_broadcast_once_in_order(
    live: ServerProcess,
) -> None:
    by_pid: dict[str, list[ClientConnection]] = {}
    opened: list[ClientConnection] = []
    with contextlib.ExitStack() as stack:
        for _ in range(40):
            ws = stack.enter_context(_ws(live, "/room"))
            opened.append(ws)
            by_pid.setdefault(str(ws.recv(timeout=5)), []).append(ws)
            if len(by_pid) == 2:
                break
        assert len(by_pid) == 2, f"all connections landed on {list(by_pid)}"
        sender = opened[-1]
        messages = [f"m{n}" for n in range(30)]
        for text in messages:
            sender.send(text)
        for ws in opened:
            got = [ws.recv(timeout=5) for _ in messages]
            assert got == messages
            with pytest.raises(TimeoutError):
                ws.recv(timeout=0.2)  # and nothing twice (the app joins each channel twice)
