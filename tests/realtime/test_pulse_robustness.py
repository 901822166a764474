"""Pulse under stress, against `socketify run --workers 2`: idle pings, slow consumers,
permessage-deflate variants, and a worker killed with SIGKILL in the middle of a chat.

The app (`pulse_robustness_app.py`) sends `pid:N` first on every route, so a test knows
which worker holds each connection, and reports the close code the server saw to the
`events` room, which a watcher on either worker receives.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.sync.client import ClientConnection, connect

from tests.support.raw_websocket import (
    CLOSE,
    PING,
    PONG,
    TEXT,
    RawWebSocket,
    client_frame,
    close_frame,
)
from tests.support.serve import Launcher, ServerProcess

IDLE = 0.5  # idle_timeout of /idle


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Our own server: the kill -9 test takes one of its workers down."""
    with Launcher(tmp_path_factory.mktemp("robustness")) as launcher:
        server = launcher("tests.realtime.pulse_robustness_app:server", workers=2)
        _wait_for_both_workers(server)
        yield server


def _wait_for_both_workers(server: ServerProcess) -> None:
    """Accepting TCP is not serving yet: on a loaded machine a worker may still be booting."""
    seen: set[int] = set()
    deadline = time.monotonic() + 30
    while len(seen) < 2 and time.monotonic() < deadline:
        with (
            contextlib.suppress(OSError, TimeoutError, ConnectionClosed),
            _ws(server, "/events", open_timeout=10) as ws,
        ):
            seen.add(_pid(ws.recv(timeout=10)))


def _ws(live: ServerProcess, target: str, **kwargs: Any) -> ClientConnection:
    kwargs.setdefault("open_timeout", 5)
    return connect(f"ws://127.0.0.1:{live.port}{target}", **kwargs)


def _pid(first_message: object) -> int:
    text = str(first_message)
    assert text.startswith("pid:"), text
    return int(text[4:])


@contextlib.contextmanager
def _events(live: ServerProcess) -> Iterator[ClientConnection]:
    with _ws(live, "/events") as watcher:
        _pid(watcher.recv(timeout=5))
        yield watcher


def _reported_close(watcher: ClientConnection, token: str, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while True:
        line = str(watcher.recv(timeout=max(0.01, deadline - time.monotonic())))
        if line.startswith(f"close:{token}:"):
            return int(line.rsplit(":", 1)[1])


# -- idle timeout with automatic pings ------------------------------------------------------


def test_idle_client_that_answers_pings_stays_connected(live: ServerProcess) -> None:
    with RawWebSocket(live.port, "/idle") as ws:
        _pid(ws.recv_message()[1].decode())
        pings = 0
        deadline = time.monotonic() + 6 * IDLE
        while (left := deadline - time.monotonic()) > 0:
            try:
                frame = ws.recv_frame(timeout=left)
            except TimeoutError:
                break
            assert frame.opcode == PING, frame
            pings += 1
            ws.send(client_frame(PONG, frame.payload))
        assert pings >= 3, "an idle connection must be pinged once per idle period"
        ws.send(client_frame(TEXT, b"still here"))
        assert ws.recv_message(timeout=5) == (TEXT, b"still here")


def test_idle_client_that_ignores_pings_gets_a_1001_close_frame_then_is_dropped(
    live: ServerProcess,
) -> None:
    token = uuid.uuid4().hex
    with _events(live) as watcher, RawWebSocket(live.port, f"/idle?token={token}") as ws:
        _pid(ws.recv_message()[1].decode())
        started = time.monotonic()
        ping = ws.recv_frame(timeout=5)
        assert ping.opcode == PING
        close = ws.recv_frame(timeout=5)
        assert (close.opcode, close.close_code) == (CLOSE, 1001), close
        assert close.payload[2:] == b"idle timeout"
        assert ws.at_eof(timeout=5), "a silent peer must be dropped"
        elapsed = time.monotonic() - started
        assert elapsed < 8 * IDLE, f"dropped after {elapsed:.2f} s"  # two idle periods + slack
        assert _reported_close(watcher, token) == 1001


def test_websockets_client_with_its_own_keepalive_is_never_dropped(live: ServerProcess) -> None:
    with _ws(live, "/idle", ping_interval=None) as ws:  # the library answers our pings
        _pid(ws.recv(timeout=5))
        time.sleep(5 * IDLE)
        ws.send("ok?")
        assert ws.recv(timeout=5) == "ok?"


# -- backpressure: max_backpressure, drain, the slow-consumer policy ------------------------


def test_slow_consumer_sends_are_dropped_past_max_backpressure_then_drain_fires(
    live: ServerProcess,
) -> None:
    count, size = 2000, 16 * 1024  # 32 MiB: far more than the kernel buffers hold
    with _ws(live, "/flood", max_size=None) as ws:
        _pid(ws.recv(timeout=5))
        ws.send(f"flood {count} {size}")
        time.sleep(0.5)  # do not read: the server's sends back up
        received = 0
        while True:
            message = ws.recv(timeout=10)
            if isinstance(message, str) and message.startswith("drained:"):
                break
            assert len(message) == size
            received += 1
        sent, dropped, pending = map(int, message.split(":")[1:])
        # Policy: once more than max_backpressure (64 KiB) waits, sends return False and
        # the message is dropped; the connection stays open and `drain` tells the app.
        assert dropped > 0 and sent + dropped == count
        assert received == sent, "every accepted message arrives, none twice"
        assert 0 < pending <= 64 * 1024 + size
        ws.send("after")
        assert ws.recv(timeout=5) == "echo:after"


# -- broadcast frames are corked until the loop turn ends ----------------------------------


def test_a_burst_of_frames_goes_out_in_one_write_in_order_behind_earlier_replies(
    live: ServerProcess,
) -> None:
    with RawWebSocket(live.port, "/burst") as ws:
        ws.send(client_frame(PING, b"first") + client_frame(TEXT, b"400"))
        pong = ws.recv_frame()
        assert (pong.opcode, pong.payload) == (PONG, b"first")
        frames = [f"frame {n}".encode() for n in range(400)]  # ~4 KiB, max_backpressure 1 KiB
        assert [ws.recv_message(timeout=5)[1] for _ in frames] == frames
        # Every frame of the burst was still waiting when the burst ended (with the pong the
        # protocol put in front of the first one): they leave together at the end of the
        # loop turn, and the text sent after them queues behind them.
        waiting = 2 + len(b"first") + sum(2 + len(frame) for frame in frames)
        assert ws.recv_message(timeout=5) == (TEXT, f"pending:{waiting}".encode())


def test_a_close_right_behind_a_burst_still_gets_the_burst_and_its_echo(
    live: ServerProcess,
) -> None:
    with RawWebSocket(live.port, "/burst") as ws:
        ws.send(client_frame(TEXT, b"5") + close_frame(4000, b"done"))  # one packet
        frames = [f"frame {n}".encode() for n in range(5)]
        assert [ws.recv_message(timeout=5)[1] for _ in frames] == frames
        assert ws.recv_message(timeout=5)[1].startswith(b"pending:")
        assert ws.expect_close().close_code == 4000
        assert ws.at_eof()


# -- permessage-deflate ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "factory",
    [
        ClientPerMessageDeflateFactory(),
        ClientPerMessageDeflateFactory(server_no_context_takeover=True),
        ClientPerMessageDeflateFactory(client_no_context_takeover=True),
        ClientPerMessageDeflateFactory(server_max_window_bits=10, client_max_window_bits=9),
        ClientPerMessageDeflateFactory(
            server_no_context_takeover=True,
            client_no_context_takeover=True,
            server_max_window_bits=9,
            client_max_window_bits=True,
        ),
    ],
    ids=["defaults", "server-nct", "client-nct", "windows-10-9", "all"],
)
def test_deflate_is_negotiated_and_echoes_with_each_parameter_set(
    live: ServerProcess, factory: ClientPerMessageDeflateFactory
) -> None:
    with _ws(live, "/deflate", compression=None, extensions=[factory], max_size=None) as ws:
        _pid(ws.recv(timeout=5))
        assert ws.response is not None
        agreed = ws.response.headers["Sec-WebSocket-Extensions"]
        assert agreed.startswith("permessage-deflate")
        messages = ["hello " * 200, "x" * 70_000, "short", "hello " * 200, "é€𝄞" * 5000]
        for text in messages:
            ws.send(text)
            assert ws.recv(timeout=5) == text
        blob = os.urandom(1000) * 50
        ws.send(blob)
        assert ws.recv(timeout=5) == blob


@pytest.mark.parametrize(
    ("offer", "takeover"),
    [("permessage-deflate", True), ("permessage-deflate; server_no_context_takeover", False)],
)
def test_server_context_takeover_makes_a_repeat_message_smaller(
    live: ServerProcess, offer: str, takeover: bool
) -> None:
    text = b"the quick brown fox jumps over the lazy dog, " * 20
    with RawWebSocket(live.port, "/deflate", extensions=offer) as ws:
        assert ws.headers["sec-websocket-extensions"].startswith("permessage-deflate")
        _pid(ws.recv_message()[1].decode())
        sizes = []
        for _ in range(2):
            ws.send(client_frame(TEXT, text))
            frame = ws.recv_frame(timeout=5)
            assert frame.rsv == 0b100 and frame.fin, "a compressed message has RSV1 set"
            assert ws.inflate(frame.payload, takeover=takeover) == text
            sizes.append(len(frame.payload))
        if takeover:
            assert sizes[1] < sizes[0] / 2, sizes  # the second refers back to the first
        else:
            assert sizes[1] == sizes[0], sizes  # a fresh compressor each time


def test_compressed_client_message_is_inflated(live: ServerProcess) -> None:
    with RawWebSocket(live.port, "/deflate", extensions="permessage-deflate") as ws:
        _pid(ws.recv_message()[1].decode())
        text = b"compressed by the client " * 40
        compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
        payload = (compressor.compress(text) + compressor.flush(zlib.Z_SYNC_FLUSH))[:-4]
        ws.send(client_frame(TEXT, payload, rsv=0b100))
        assert ws.recv_message(timeout=5) == (TEXT, text)


# -- a worker killed with SIGKILL -----------------------------------------------------------


def test_kill_9_of_one_worker_leaves_chat_flowing_on_the_other(live: ServerProcess) -> None:
    with contextlib.ExitStack() as stack:
        by_pid: dict[int, list[ClientConnection]] = {}
        for _ in range(60):
            ws = stack.enter_context(_ws(live, "/chat"))
            by_pid.setdefault(_pid(ws.recv(timeout=5)), []).append(ws)
            if len(by_pid) == 2 and all(len(members) >= 2 for members in by_pid.values()):
                break
        assert len(by_pid) == 2, f"all chat members landed on {list(by_pid)}"
        victim, survivor = sorted(by_pid, key=lambda pid: len(by_pid[pid]))
        os.kill(victim, signal.SIGKILL)
        for ws in by_pid[victim]:
            with pytest.raises((ConnectionClosed, TimeoutError, OSError)):
                ws.recv(timeout=5)  # their connections die with the worker
        survivors = by_pid[survivor]
        expected = [f"after kill {n}" for n in range(20)]
        for text in expected:
            survivors[0].send(text)
        for ws in survivors:
            assert [ws.recv(timeout=5) for _ in expected] == expected  # one sender: in order
        for n, ws in enumerate(survivors):
            ws.send(f"from {n}")
        for ws in survivors:
            got = {ws.recv(timeout=5) for _ in survivors}
            assert got == {f"from {n}" for n in range(len(survivors))}
        # The master replaces the worker; newcomers on it chat with the survivors.
        newcomer = _member_on_new_worker(live, stack, {victim, survivor})
        newcomer.send("hello from the new worker")
        for ws in [*survivors, newcomer]:
            assert ws.recv(timeout=5) == "hello from the new worker"


def _member_on_new_worker(
    live: ServerProcess, stack: contextlib.ExitStack, old: set[int]
) -> ClientConnection:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            ws = stack.enter_context(_ws(live, "/chat"))
        except (OSError, ConnectionClosed):
            time.sleep(0.2)  # the replacement is still starting
            continue
        if _pid(ws.recv(timeout=5)) not in old:
            return ws
        ws.close()
    raise AssertionError("no connection reached a replacement worker within 20 s")
