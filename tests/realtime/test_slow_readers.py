"""Slow readers against `socketify run` (one worker): the send backlog is bounded.

Clients shrink SO_RCVBUF to 4 KiB and stop reading while the server floods them; the app
(`slow_reader_app`) reports what each send returned and the close code its callback saw.
Past `max_backpressure` (1 MiB by default) a WebSocket is closed with 1008 and an event
stream is closed; a client that reads again finds the close frame behind what was in flight,
one that never does is dropped after the close wait, and the worker serves everyone else
throughout. An idle WebSocket gets a 1001 close frame before it is dropped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from socketify.realtime.pulse import MAX_BACKPRESSURE
from tests.realtime.realtime_client import SseClient
from tests.support.raw_websocket import BINARY, CLOSE, PING, TEXT, RawWebSocket, client_frame
from tests.support.serve import Launcher, ServerProcess

RCVBUF = 4096
SIZE = 64 * 1024
COUNT = 4000  # 250 MiB per client if nothing bounded the backlog
CLOSE_WAIT = 5.0  # how long a close we started waits for the peer (Channel's CLOSE_TIMEOUT)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One worker, so every report comes from the worker that held the connection."""
    with Launcher(tmp_path_factory.mktemp("slow-readers")) as launcher:
        yield launcher("tests.realtime.slow_reader_app:server", workers=1)


def _report(live: ServerProcess, key: str, field: str, timeout: float = 15.0) -> Any:
    """The worker's record of `field` for `key`, once it is there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = requests.get(f"{live.url}/report", params={"key": key}, timeout=5).json()
        if value.get(field) is not None:
            return value[field]
        time.sleep(0.02)
    raise AssertionError(f"no {field} for {key} within {timeout} s")


def _stalled_flood(live: ServerProcess) -> tuple[RawWebSocket, str]:
    """A WebSocket with a 4 KiB receive buffer that asked for the flood and reads no more."""
    ws = RawWebSocket(live.port, "/flood", rcvbuf=RCVBUF, timeout=10)
    key = ws.recv_message()[1].decode()
    ws.send(client_frame(TEXT, f"{COUNT} {SIZE}".encode()))
    return ws, key


def _assert_bounded(statuses: dict[str, int]) -> None:
    assert sum(statuses.values()) == COUNT
    assert statuses["DROPPED"] > COUNT // 2, statuses
    # What the kernel took is not ours to bound; what waited for the peer is: the limit
    # plus the message that crossed it.
    assert statuses.get("BACKPRESSURE", 0) * SIZE <= MAX_BACKPRESSURE + SIZE, statuses


def test_a_websocket_reader_that_stalls_is_closed_1008_and_sees_it_when_it_reads(
    live: ServerProcess,
) -> None:
    ws, key = _stalled_flood(live)
    with ws:
        statuses = _report(live, key, "statuses")
        _assert_bounded(statuses)
        # Reading again: what was in flight, then our close frame; nothing past the limit.
        received = 0
        while (frame := ws.recv_frame(timeout=10)).opcode == BINARY:
            assert len(frame.payload) == SIZE
            received += 1
        assert (frame.opcode, frame.close_code) == (CLOSE, 1008), frame
        assert 0 < received <= statuses["SENT"] + statuses.get("BACKPRESSURE", 0)
        ws.send(client_frame(CLOSE, frame.payload[:2]))
        assert ws.at_eof()
    assert _report(live, key, "close") == 1008


def test_a_reader_that_never_reads_again_is_dropped_after_the_close_wait_while_others_are_served(
    live: ServerProcess,
) -> None:
    dead, key = _stalled_flood(live)
    with dead:
        started = time.monotonic()
        _assert_bounded(_report(live, key, "statuses"))
        # Meanwhile the worker serves the others as usual.
        with RawWebSocket(live.port, "/echo") as other:
            other.recv_message()
            other.send(client_frame(TEXT, b"still here"))
            assert other.recv_message(timeout=5) == (TEXT, b"still here")
        assert requests.get(f"{live.url}/ping", timeout=5).text == "pong"
        assert _report(live, key, "close", timeout=CLOSE_WAIT + 10) == 1008
        assert time.monotonic() - started < CLOSE_WAIT + 8  # the close wait, flush, linger


def test_frames_sent_in_the_handler_before_the_101_count_against_the_limit(
    live: ServerProcess,
) -> None:
    target = f"/flood-in-handler?key=handler&count={COUNT}&size={SIZE}"
    with RawWebSocket(live.port, target, timeout=10) as ws:
        # Nothing could be written before the 101: the whole flood waited, so it is dropped.
        assert ws.expect_close(timeout=10).close_code == 1008
        ws.send(client_frame(CLOSE, (1008).to_bytes(2, "big")))
        assert ws.at_eof()
    _assert_bounded(_report(live, "handler", "statuses"))
    assert _report(live, "handler", "close") == 1008


def test_hub_broadcasts_to_a_stalled_member_hit_the_same_bound(live: ServerProcess) -> None:
    with (
        RawWebSocket(live.port, "/room?key=stalled", rcvbuf=RCVBUF, timeout=10) as stalled,
        RawWebSocket(live.port, "/room?key=reader", timeout=10) as reader,
    ):
        assert stalled.recv_message() == (TEXT, b"joined")
        assert reader.recv_message() == (TEXT, b"joined")
        count, size = 600, 16 * 1024  # ~9.4 MiB: well past the kernel's buffers and the limit
        params = {"count": count, "size": size}
        with ThreadPoolExecutor(1) as pool:
            sent = pool.submit(requests.post, f"{live.url}/broadcast", params=params, timeout=60)
            # The member that reads gets every broadcast; the stalled one is closed with 1008
            # (and leaves the room when its connection ends, after the close wait).
            for _ in range(count):
                assert reader.recv_message(timeout=10) == (BINARY, b"x" * size)
            sent.result().raise_for_status()
        assert _report(live, "stalled", "close", timeout=CLOSE_WAIT + 10) == 1008
        assert requests.post(f"{live.url}/broadcast", params={"count": 0, "size": 0}).json() == {
            "members": 1
        }


def test_an_event_stream_whose_client_stalls_is_closed_and_the_worker_keeps_serving(
    live: ServerProcess,
) -> None:
    target = f"/events?key=sse&count={COUNT}&size={SIZE}"
    client = SseClient(live.port, target, rcvbuf=RCVBUF)
    try:
        assert client.head.startswith("HTTP/1.1 200 ")
        _assert_bounded(_report(live, "sse", "statuses"))
        assert _report(live, "sse", "close") == "closed"
        assert requests.get(f"{live.url}/ping", timeout=5).text == "pong"
        # Reading again: the events that were in flight, then the end of the stream.
        assert client.next_event().event == "ready"
        assert client.at_eof(timeout=10)
    finally:
        client.close()


def test_an_idle_websocket_gets_a_1001_close_frame_and_its_close_callback_sees_1001(
    live: ServerProcess,
) -> None:
    with RawWebSocket(live.port, "/idle") as ws:
        key = ws.recv_message()[1].decode()
        assert ws.recv_frame(timeout=5).opcode == PING  # ignored: we stay silent
        close = ws.recv_frame(timeout=5)
        assert (close.opcode, close.close_code, close.payload[2:]) == (CLOSE, 1001, b"idle timeout")
        assert ws.at_eof()
    assert _report(live, key, "close") == 1001
