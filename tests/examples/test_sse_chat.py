"""examples/sse_chat.py: the page, chat and ticks in-process, then exactly one tick stream per
client (not one per worker) and chat across 2 real workers."""

from __future__ import annotations

import importlib
import socket
import sys
import time
import urllib.request
from collections.abc import Iterator
from types import ModuleType

import pytest

from socketify.testing import TestClient
from socketify.testing.realtime import EventStreamSession, SseEvent
from tests.support.serve import Launcher

pytestmark = pytest.mark.timeout(60)

APP = "examples.sse_chat"
TICK = 0.2  # seconds; the example's default of 2 would make the tests slow


@pytest.fixture
def sse_chat(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.setenv("SSE_CHAT_TICK_SECONDS", str(TICK))
    sys.modules.pop(APP, None)
    yield importlib.import_module(APP)
    sys.modules.pop(APP, None)


def test_the_page_listens_for_chat_and_tick_events(sse_chat: ModuleType) -> None:
    page = TestClient(sse_chat.server).get("/")
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
    assert 'new EventSource("/events")' in page.text
    assert 'addEventListener("chat"' in page.text and 'addEventListener("tick"' in page.text
    assert "textContent = event.data" in page.text  # messages shown as text, never as HTML


def test_welcome_counts_clients_and_a_message_reaches_everyone(sse_chat: ModuleType) -> None:
    client = TestClient(sse_chat.server)
    with client.sse("/events") as first:
        assert first.next_event() == SseEvent("welcome! clients online: 1", "chat")
        with client.sse("/events") as second:
            assert second.next_event().data == "welcome! clients online: 2"
            said = client.post("/say", data=b"hello\nworld")
            assert (said.status, said.body) == (204, b"")
            for stream in (first, second):
                assert _next_named(stream, "chat").data == "hello\nworld"
    assert TestClient(sse_chat.server).post("/say", data=b"   ").status == 422
    assert TestClient(sse_chat.server).post("/say", data=b"x" * 2001).status == 422


def test_ticks_count_up_once_per_period(sse_chat: ModuleType) -> None:
    client = TestClient(sse_chat.server)
    with client.sse("/events") as events:
        ticks = [int(_next_named(events, "tick", 2).data) for _ in range(3)]
    assert ticks == [ticks[0], ticks[0] + 1, ticks[0] + 2]


def _next_named(stream: EventStreamSession, name: str, timeout: float = 5.0) -> SseEvent:
    """The next event called `name`, skipping the others."""
    while True:
        event = stream.next_event(timeout)
        if event.event == name:
            return event


class _LiveStream:
    """A plain socket reading `GET /events` of a live server, event by event."""

    def __init__(self, port: int) -> None:
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self._sock.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
        self._buffer = b""
        while b"\r\n\r\n" not in self._buffer:
            self._buffer += self._sock.recv(4096)
        head, self._buffer = self._buffer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200")

    def events_until(self, deadline: float) -> list[tuple[str, str]]:
        """(event, data) pairs arrived by the monotonic `deadline` (the stream is left open)."""
        while True:
            # Past the deadline, still take what already arrived, then stop.
            self._sock.settimeout(max(deadline - time.monotonic(), 0.05))
            try:
                chunk = self._sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            self._buffer += chunk
        *blocks, self._buffer = self._buffer.split(b"\n\n")
        found = []
        for block in blocks:
            fields = dict(line.split(": ", 1) for line in block.decode().split("\n"))
            found.append((fields.get("event", "message"), fields.get("data", "")))
        return found

    def close(self) -> None:
        self._sock.close()


def test_each_client_gets_one_tick_stream_and_every_message_across_workers(serve: Launcher) -> None:
    env = {"SSE_CHAT_TICK_SECONDS": str(TICK)}
    with serve(f"{APP}:server", workers=2, env=env) as server:
        # Six connections: the kernel spreads them over both workers.
        streams = [_LiveStream(server.port) for _ in range(6)]
        try:
            time.sleep(0.3)  # the workers hear each other's room counts
            streams.append(_LiveStream(server.port))
            welcome = streams[-1].events_until(time.monotonic() + 0.3)[0]
            assert welcome == ("chat", "welcome! clients online: 7"), server.output()
            request = urllib.request.Request(f"{server.url}/say", data=b"hi all", method="POST")
            with urllib.request.urlopen(request, timeout=5) as answer:
                assert answer.status == 204
            deadline = time.monotonic() + 5 * TICK
            for stream in streams:
                seen = stream.events_until(deadline)
                assert ("chat", "hi all") in seen, server.output()
                ticks = [int(data) for name, data in seen if name == "tick"]
                # One ticker per worker broadcasting to the room would give each client every
                # number twice; here each number comes once, in order.
                assert len(ticks) >= 3
                assert ticks == list(range(ticks[0], ticks[0] + len(ticks))), ticks
        finally:
            for stream in streams:
                stream.close()
