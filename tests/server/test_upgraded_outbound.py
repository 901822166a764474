"""`Outbound` bookkeeping and the backlog policy of `Channel`, on a socket pair in-process.

The server end is a non-blocking socket with a small send buffer, so the kernel refuses
bytes after a few KiB and the backlog builds up in `Outbound`, as for a peer that stopped
reading; the test reads the other end when it wants the backlog to move.
"""

from __future__ import annotations

import _socket
import socket
from typing import Any

import gevent
import pytest
from gevent.socket import wait_write

from socketify import Server
from socketify.protocol.websocket import CloseCode, Connection, Opcode, State, frame_bytes
from socketify.realtime import pulse, sse
from socketify.server.upgraded import (
    CORK_BYTES,
    MAX_BACKPRESSURE,
    UNBOUNDED,
    Outbound,
    SendStatus,
    check_max_backpressure,
)

pytestmark = [pytest.mark.timeout(30), pytest.mark.slow]


class _Peer:
    """What `Outbound` uses of a connection: a non-blocking socket and a parking `send`."""

    scheme = "http"

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.deadline: float | None = None

    def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[self.sock.send(view) :]
            except BlockingIOError:
                wait_write(self.sock.fileno())


@pytest.fixture
def pair() -> Any:
    """(server end as a `_Peer`, client end as a blocking socket that reads on demand)."""
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    raw = _socket.socket(ours.family, ours.type, ours.proto, ours.detach())
    raw.setblocking(False)
    yield _Peer(raw), theirs
    raw.close()
    theirs.close()


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        gevent.sleep(0)  # let the flusher write what the kernel now has room for
        sock.settimeout(0.01)
        try:
            data += sock.recv(n - len(data))
        except TimeoutError:
            pass
    return data


def test_send_status_is_truthy_unless_dropped_and_compares_like_the_old_bool() -> None:
    assert SendStatus.SENT == True  # noqa: E712 - the point is the comparison
    assert SendStatus.DROPPED == False  # noqa: E712
    assert bool(SendStatus.BACKPRESSURE) and not SendStatus.DROPPED


def test_max_backpressure_must_be_a_positive_byte_count_and_none_is_refused() -> None:
    assert check_max_backpressure(MAX_BACKPRESSURE) == 1 << 20
    assert check_max_backpressure(UNBOUNDED) == UNBOUNDED
    with pytest.raises(ValueError, match="UNBOUNDED"):
        check_max_backpressure(None)
    for bad in (0, -1, True, 1.5, "1"):
        with pytest.raises(ValueError, match="positive number of bytes"):
            check_max_backpressure(bad)
    with pytest.raises(ValueError):
        Server().ws("/x", max_backpressure=None)  # refused at registration, not per request


def test_held_sends_count_as_backlog_and_go_out_in_order_on_attach(pair: Any) -> None:
    peer, client = pair
    out = Outbound()
    assert out.send(b"one ") is SendStatus.SENT and out.send_soon(b"two") is SendStatus.SENT
    assert out.backlog == out.pending == 7 and not out.attached
    assert out.attach(peer) is SendStatus.SENT
    assert out.backlog == 0 and client.recv(100) == b"one two"


def test_what_the_kernel_refuses_is_backlog_and_discard_keeps_only_the_message_in_flight(
    pair: Any,
) -> None:
    peer, client = pair
    out = Outbound()
    out.attach(peer)
    drained: list[bool] = []
    out.on_drain = lambda: drained.append(True)
    first, second, third = b"a" * 100_000, b"b" * 50_000, b"c" * 50_000
    assert out.send(first) is SendStatus.BACKPRESSURE  # the kernel took a few KiB
    assert out.send(second) is SendStatus.BACKPRESSURE
    in_flight = out.backlog - len(second)
    assert 0 < in_flight < len(first)
    assert out.discard() == len(second)  # whole messages only; the part-written one stays
    assert out.backlog == in_flight
    assert out.send(third) is SendStatus.BACKPRESSURE
    # The wire: all of `first` (framing is intact), then `third`; `second` never went out.
    assert _read_exactly(client, len(first) + len(third)) == first + third
    assert out.wait_flushed(5) and out.backlog == 0 and drained == [True]


def test_a_cork_is_written_at_once_when_it_reaches_cork_bytes(pair: Any) -> None:
    peer, client = pair
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    peer.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    out = Outbound()
    out.attach(peer)
    assert out.send_soon(b"x" * 100) is SendStatus.SENT
    assert out.backlog == 0 and out.pending == 100  # corked: not refused by anyone yet
    chunk = b"y" * (CORK_BYTES // 4)
    for _ in range(4):
        out.send_soon(chunk)
    assert out.pending == 0, "a full cork goes to the kernel without waiting for the turn's end"
    assert _read_exactly(client, 100 + CORK_BYTES) == b"x" * 100 + chunk * 4


def _channel(**options: Any) -> pulse.Channel:
    return pulse.Channel(Connection(), **options)


def test_channel_past_its_limit_drops_the_send_discards_its_backlog_and_queues_a_1008_close() -> (
    None
):
    ch = _channel(max_backpressure=10_000)
    statuses = [ch.send_binary(b"x" * 4000) for _ in range(5)]
    assert statuses == [SendStatus.SENT] * 3 + [SendStatus.DROPPED] * 2
    # Only the close frame waits now (at most 2 + 125 bytes): nothing was written before the
    # 101, so the whole backlog was discarded.
    assert 0 < ch.pending_bytes <= 127
    assert ch.send_text("later") is SendStatus.DROPPED
    assert ch.alive, "the channel ends when the close handshake does"


def test_channel_that_only_drops_stays_open_and_sends_again_once_below_the_limit() -> None:
    ch = _channel(max_backpressure=10_000, close_on_backpressure_limit=False)
    statuses = [ch.send_binary(b"x" * 4000) for _ in range(5)]
    assert statuses == [SendStatus.SENT] * 3 + [SendStatus.DROPPED] * 2
    assert ch.pending_bytes == 3 * len(frame_bytes(Opcode.BINARY, b"x" * 4000))
    ch.max_backpressure = UNBOUNDED  # settable per channel
    assert ch.send_binary(b"y") is SendStatus.SENT
    assert ch.close(CloseCode.NORMAL) is True


def test_protocol_state_after_an_over_limit_close_is_close_sent() -> None:
    proto = Connection()
    ch = pulse.Channel(proto, max_backpressure=1)
    ch.send_text("a")
    ch.send_text("b")
    assert proto.state is State.CLOSE_SENT


def test_event_stream_past_its_limit_drops_and_is_closed() -> None:
    stream = sse.EventStream(None, None, max_backpressure=10_000)
    statuses = [stream.send("x" * 4000) for _ in range(5)]
    assert statuses == [SendStatus.SENT] * 3 + [SendStatus.DROPPED] * 2
    assert stream.pending_bytes == 0, "the backlog is given back at once"
    assert stream.comment("still there?") is SendStatus.DROPPED
