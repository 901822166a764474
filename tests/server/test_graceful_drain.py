"""A graceful stop (TERM or INT to the master) or reload (HUP) winds every connection down.

Through the real `socketify run` with two workers and real clients: WebSocket clients
(`websockets`, on Pulse and on `server.ws`) receive close 1001, event streams get their last
event and end (over HTTP/2 too, after a GOAWAY), an idle keep-alive connection is closed, a
request in flight is still answered, and the master exits long before the 30-second
`graceful_timeout` the app keeps.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.realtime.realtime_client import SseClient
from tests.support.raw_client import Reader, get
from tests.support.raw_client import connect as raw_connect
from tests.support.raw_h2 import ErrorCode, FrameType, H2Client
from tests.support.serve import Launcher, ServerProcess
from tests.support.wait import wait_for

APP = "tests.server.drain_app:server"
GRACEFUL_TIMEOUT = 30.0  # the app's: what a stop that waited it out would take
# A stop that winds down by itself takes about a second; the margin is for a busy machine,
# and still far below GRACEFUL_TIMEOUT.
WOUND_DOWN = 12.0


@dataclass
class Ending:
    """How one long-lived client saw its connection end."""

    code: int | None = None  # a WebSocket's close code
    messages: list[str | bytes] = field(default_factory=list)  # what a WebSocket received
    events: list[str] = field(default_factory=list)  # an event stream's event names
    at: float | None = None  # time.monotonic() when it ended


class Clients:
    """Three WebSocket clients and two event streams, each read by a thread until it ends."""

    def __init__(self, server: ServerProcess, opened: contextlib.ExitStack) -> None:
        host, port = server.tcp
        paths = ["/pulse", "/ws", "/pulse"]
        self.sockets: list[ClientConnection] = [
            opened.enter_context(connect(f"ws://{host}:{port}{path}", open_timeout=10))
            for path in paths
        ]
        self.pids = {int(ws.recv(timeout=10)) for ws in self.sockets}
        self.streams = [SseClient(port, "/events") for _ in range(2)]
        for stream in self.streams:
            opened.callback(stream.sock.close)
            stream.sock.settimeout(GRACEFUL_TIMEOUT + 10)
            hello = stream.next_event()
            self.pids.add(int(hello.data[0]))
        self.socket_endings = [Ending() for _ in self.sockets]
        self.stream_endings = [Ending() for _ in self.streams]
        self._threads = [
            *map(self._reader, [self._read_socket] * 3, self.sockets, self.socket_endings),
            *map(self._reader, [self._read_stream] * 2, self.streams, self.stream_endings),
        ]

    @staticmethod
    def _reader(
        read: Callable[[Any, Ending], None], client: Any, ending: Ending
    ) -> threading.Thread:
        thread = threading.Thread(target=read, args=(client, ending), daemon=True)
        thread.start()
        return thread

    @staticmethod
    def _read_socket(ws: ClientConnection, ending: Ending) -> None:
        try:
            while True:
                ending.messages.append(ws.recv(timeout=GRACEFUL_TIMEOUT + 10))
        except ConnectionClosed as exc:
            ending.code = exc.rcvd.code if exc.rcvd is not None else None
        except TimeoutError:
            pass
        ending.at = time.monotonic()

    @staticmethod
    def _read_stream(stream: SseClient, ending: Ending) -> None:
        try:
            while True:
                ending.events.append(stream.next_event().event)
        except (EOFError, OSError):
            pass
        ending.at = time.monotonic()

    def wait_ended(self, timeout: float) -> None:
        """Wait until each thread saw its connection end (at most `timeout` in all)."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))


class SlowRequest:
    """A GET /slow (1.5 s in its handler) sent from a thread; `answer` once it came back."""

    def __init__(self, server: ServerProcess) -> None:
        self.answer: bytes | None = None
        self._thread = threading.Thread(target=self._run, args=(server,), daemon=True)
        self._thread.start()

    def _run(self, server: ServerProcess) -> None:
        self.answer = get(server.address, "/slow", timeout=GRACEFUL_TIMEOUT).body

    def wait(self, timeout: float) -> bytes | None:
        self._thread.join(timeout)
        return self.answer


def assert_wound_down(clients: Clients, started: float) -> None:
    clients.wait_ended(WOUND_DOWN)
    sockets, streams = clients.socket_endings, clients.stream_endings
    assert [ending.code for ending in sockets] == [1001, 1001, 1001]
    # The Pulse routes (first and last) say goodbye from `on_stop`; `server.ws` has none.
    assert [ending.messages for ending in sockets] == [["bye"], [], ["bye"]]
    assert all(ending.events[-1:] == ["bye"] for ending in streams), streams
    for ending in [*sockets, *streams]:
        assert ending.at is not None and ending.at - started < WOUND_DOWN


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_stop_closes_websockets_with_1001_ends_event_streams_and_answers_in_flight(
    serve: Launcher, signum: int, tmp_path: Path
) -> None:
    in_handler = tmp_path / "slow-started"
    server = serve(APP, workers=2, env={"DRAIN_STARTED_FILE": str(in_handler)})
    with contextlib.ExitStack() as opened:
        clients = Clients(server, opened)
        slow = SlowRequest(server)
        wait_for(in_handler.exists, WOUND_DOWN, message="the slow request in its handler")
        started = time.monotonic()
        server.signal(signum)
        assert server.wait_exit(WOUND_DOWN) == 0, server.output()
        assert time.monotonic() - started < WOUND_DOWN
        assert slow.wait(5.0) == b"finished"
        assert_wound_down(clients, started)


def test_hup_winds_the_old_workers_connections_down_and_new_workers_serve(
    serve: Launcher,
) -> None:
    server = serve(APP, workers=2)
    old = set(server.workers())
    with contextlib.ExitStack() as opened:
        clients = Clients(server, opened)
        assert clients.pids <= old
        started = time.monotonic()
        server.signal(signal.SIGHUP)
        assert_wound_down(clients, started)
        wait_for(lambda: not set(server.workers()) & old, WOUND_DOWN, message="old workers gone")
        answered_by = int(get(server.address, "/pid", timeout=10).body)
        assert answered_by not in old


def test_term_says_goaway_and_ends_an_event_stream_on_http2(serve: Launcher) -> None:
    server = serve(APP)
    with H2Client.connect(server.tcp, timeout=WOUND_DOWN) as client:
        client.handshake()
        sid = client.request("GET", "/events")
        client.read_until(lambda received: received.kind == FrameType.DATA)
        started = time.monotonic()
        server.signal(signal.SIGTERM)
        stream = client.response(sid)  # ends (END_STREAM) instead of running on
        assert b"event: bye" in stream.body
        assert client.goaway is not None and client.goaway.error_code == ErrorCode.NO_ERROR
        client.expect_closed()
    assert server.wait_exit(WOUND_DOWN) == 0
    assert time.monotonic() - started < WOUND_DOWN


def test_term_closes_an_idle_keep_alive_connection_and_exits(serve: Launcher) -> None:
    server = serve(APP)
    with raw_connect(server.address) as sock:
        sock.sendall(b"GET /pid HTTP/1.1\r\nHost: x\r\n\r\n")
        reader = Reader(sock)
        assert reader.read_response().status == 200
        started = time.monotonic()
        server.signal(signal.SIGTERM)
        assert reader.at_eof(WOUND_DOWN)  # closed, not kept for a next request
    assert server.wait_exit(WOUND_DOWN) == 0
    assert time.monotonic() - started < WOUND_DOWN
