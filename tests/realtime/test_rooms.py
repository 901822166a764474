"""The rooms core (`socketify.realtime.rooms.Rooms`) under both of its kinds and a third.

Several `Rooms` on one `LocalBus` play several workers: they hear each other's broadcasts and
census messages exactly as workers do over the master's bus, without forking. Real members
come from `TestClient` (the real connection code over a socket pair) or are real `Channel`s
and `EventStream`s whose socket is not attached yet, so what they were sent waits in their
queue where it can be read back.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import gevent
import pytest

from socketify import Request, Response, Server
from socketify.protocol.websocket import CloseCode, Opcode, frame_bytes
from socketify.protocol.websocket import Connection as Protocol
from socketify.realtime import pulse, sse
from socketify.realtime.pulse.channel import Channel
from socketify.realtime.rooms import Rooms, Sender
from socketify.realtime.sse import EventStream
from socketify.testing import TestClient
from tests.support.wait import wait_for
from workers.shared.bus import LocalBus

pytestmark = pytest.mark.timeout(30)


class _SmallBus(LocalBus):
    """The in-process bus with a record limit, like the worker bus but tiny."""

    max_payload = 64


class _Box:
    """A third kind of member: a mailbox that records what it is given."""

    def __init__(self, ident: str, *, broken: bool = False) -> None:
        self.id = ident
        self.alive = True
        self.broken = broken
        self.got: list[bytes] = []
        self.closers: list[Callable[[_Box], object]] = []

    def put(self, data: bytes) -> None:
        if self.broken:
            raise RuntimeError("this mailbox is broken")
        self.got.append(data)

    def end(self) -> None:
        self.alive = False
        for fn in self.closers:
            fn(self)


class _Boxes(Rooms[_Box]):
    """Rooms of mailboxes: the whole of what a kind of member has to say."""

    def __init__(self, bus: LocalBus) -> None:
        super().__init__("boxes", bus)
        self.watches = 0

    def sender_for(self, member: _Box) -> Sender:
        return member.put

    def watch_close(self, member: _Box, gone: Callable[[_Box], object]) -> None:
        self.watches += 1
        member.closers.append(gone)


def _channel(max_backpressure: int = pulse.UNBOUNDED) -> Channel:
    """A real channel before its 101: frames sent to it wait in its queue (`queued()`)."""
    return Channel(Protocol(), max_backpressure=max_backpressure)


@pytest.fixture
def bus() -> Iterator[LocalBus]:
    yield LocalBus()


def _serve_both(pulse_rooms: pulse.Hub, sse_rooms: sse.Hub) -> TestClient:
    server = Server()

    @server.get("/ws")
    def ws(req: Request, res: Response) -> None:
        ch = pulse.upgrade(req, res)
        if ch is not None:
            pulse_rooms.join(req.query["room"], ch)

    @server.get("/events")
    def events(req: Request, res: Response) -> None:
        sse_rooms.join(req.query["room"], sse.upgrade(req, res))

    return TestClient(server)


def test_a_pulse_hub_and_an_sse_hub_in_one_process_keep_their_members_apart(
    bus: LocalBus,
) -> None:
    websockets, streams = pulse.Hub("rooms-test-ws", bus), sse.Hub("rooms-test-sse", bus)
    client = _serve_both(websockets, streams)
    with (
        client.websocket("/ws", query={"room": "lobby"}) as ws,
        client.sse("/events", query={"room": "lobby"}) as events,
    ):
        assert websockets.room_size("lobby") == 1 and streams.room_size("lobby") == 1
        websockets.broadcast_text("lobby", "one")
        streams.broadcast("lobby", "first", event="news", id=1)
        websockets.broadcast_binary("lobby", b"\x00two")
        streams.broadcast("lobby", "second\nline")
        assert ws.receive() == "one" and ws.receive() == b"\x00two"
        first, second = events.next_event(), events.next_event()
        assert (first.event, first.data, first.id) == ("news", "first", "1")
        assert (second.event, second.data) == ("message", "second\nline")
        with pytest.raises(TimeoutError):
            ws.receive(timeout=0.2)  # nothing of the event stream's reached the WebSocket
    wait_for(
        lambda: websockets.local_size("lobby") == 0 and streams.local_size("lobby") == 0,
        10,
        interval=0.01,
        sleep=gevent.sleep,
    )
    assert websockets.room_size("lobby") == 0 and streams.room_size("lobby") == 0


def test_members_on_every_worker_get_one_publishers_broadcasts_in_order_parts_included() -> None:
    small = _SmallBus()
    worker_a, worker_b = pulse.Hub("order", small), pulse.Hub("order", small)
    a1, a2, b1 = _channel(), _channel(), _channel()
    for worker, member in ((worker_a, a1), (worker_a, a2), (worker_b, b1)):
        assert worker.join("r", member)
    texts = [f"message {i}" + ("!" * 300 if i % 3 == 0 else "") for i in range(30)]
    for text in texts:  # every third is over the bus's record limit: it travels in parts
        worker_b.broadcast_text("r", text)
    wire = b"".join(frame_bytes(Opcode.TEXT, text.encode()) for text in texts)
    assert a1.queued() == a2.queued() == b1.queued() == wire


def test_exclude_skips_one_member_on_whichever_worker_it_is(bus: LocalBus) -> None:
    worker_a, worker_b = pulse.Hub("skip", bus), pulse.Hub("skip", bus)
    sender, other = _channel(), _channel()
    worker_a.join("r", sender)
    worker_b.join("r", other)
    worker_b.broadcast_text("r", "not to the sender", exclude=sender)
    assert sender.queued() == b""
    assert other.queued() == frame_bytes(Opcode.TEXT, b"not to the sender")


def test_room_size_counts_every_worker_and_a_closed_member_leaves_everywhere(
    bus: LocalBus,
) -> None:
    worker_a, worker_b = pulse.Hub("sizes", bus), pulse.Hub("sizes", bus)
    streams = sse.Hub("sizes-sse", bus)
    client = _serve_both(worker_a, streams)
    elsewhere = _channel()
    worker_b.join("lobby", elsewhere)
    worker_b.join("side", elsewhere)
    with client.websocket("/ws", query={"room": "lobby"}):
        assert worker_a.room_size("lobby") == worker_b.room_size("lobby") == 2
        assert (worker_a.local_size("lobby"), worker_b.local_size("lobby")) == (1, 1)
        [member] = worker_a.members("lobby")
        assert worker_a.join("side", member) and not worker_a.join("side", member)
        assert worker_b.room_size("side") == 2
        assert worker_a.rooms(member) == {"lobby", "side"}
    # The client went away: the channel's close makes it leave every room, on every worker.
    wait_for(lambda: worker_b.room_size("lobby") == 1, 10, interval=0.01, sleep=gevent.sleep)
    assert worker_b.room_size("side") == 1
    assert worker_a.rooms(member) == set() and worker_a.members("side") == []
    assert bus.subscribers("sizes:lobby") == 1  # worker_a no longer listens to the room
    with client.sse("/events", query={"room": "news"}):
        assert streams.room_size("news") == 1
    wait_for(lambda: streams.room_size("news") == 0, 10, interval=0.01, sleep=gevent.sleep)


def test_leave_all_leaves_every_room_and_a_member_is_watched_once_however_often_it_rejoins(
    bus: LocalBus,
) -> None:
    boxes = _Boxes(bus)
    box = _Box(f"{os.getpid()}-1")
    for room in ("a", "b", "c"):
        assert boxes.join(room, box)
    boxes.leave_all(box)
    assert boxes.rooms(box) == set() and all(boxes.room_size(r) == 0 for r in "abc")
    assert bus.subscribers("boxes:a") == 0
    for _ in range(5):
        boxes.join("a", box)
        boxes.leave_all(box)
    assert boxes.watches == 1  # no close callback piles up on a member that comes and goes
    boxes.join("a", box)
    box.end()
    assert boxes.room_size("a") == 0 and not boxes.join("a", box)


def test_a_member_over_its_backlog_bound_is_cut_off_and_the_others_get_everything(
    bus: LocalBus,
) -> None:
    websockets, streams = pulse.Hub("bounded", bus), sse.Hub("bounded-sse", bus)
    slow_ws, fast_ws = _channel(max_backpressure=4096), _channel()
    slow_stream = EventStream(None, None, max_backpressure=4096)
    fast_stream = EventStream(None, None, max_backpressure=sse.UNBOUNDED)
    for member in (slow_ws, fast_ws):
        websockets.join("r", member)
    for stream in (slow_stream, fast_stream):
        streams.join("r", stream)
    chunk = "x" * 1024
    for _ in range(20):
        websockets.broadcast_text("r", chunk)
        streams.broadcast("r", chunk)
    assert fast_ws.queued() == frame_bytes(Opcode.TEXT, chunk.encode()) * 20
    assert fast_stream.pending_bytes == len(sse.encode_event(chunk)) * 20
    # The slow channel's backlog was discarded and its close (1008) waits alone in the queue.
    close = slow_ws.queued()
    assert close[0] == 0x88 and int.from_bytes(close[2:4], "big") == CloseCode.POLICY_VIOLATION
    assert not slow_stream.writable and slow_stream.pending_bytes == 0


def test_a_member_whose_write_fails_does_not_keep_the_broadcast_from_the_others(
    bus: LocalBus,
) -> None:
    boxes = _Boxes(bus)
    first, broken, last = _Box("1-1"), _Box("1-2", broken=True), _Box("1-3")
    for box in (first, broken, last):
        boxes.join("r", box)
    boxes.publish("r", b"hello")
    assert first.got == last.got == [b"hello"]


def test_an_id_too_long_to_travel_cannot_be_excluded(bus: LocalBus) -> None:
    boxes = _Boxes(bus)
    with pytest.raises(ValueError, match="254 bytes"):
        boxes.publish("r", b"x", exclude=_Box("1" * 300))
