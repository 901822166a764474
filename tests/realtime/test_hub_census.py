"""Room sizes across processes: `RoomCensus` and `Hub.room_size`, several hubs on one bus.

Each `RoomCensus` (each `Hub`) built on the same `LocalBus` plays one worker: they hear each
other exactly as workers do over the master's bus, without forking.
"""

from __future__ import annotations

from typing import Any

import gevent

from socketify.protocol.websocket import Opcode, frame_bytes
from socketify.realtime import pulse, sse
from socketify.realtime.census import RoomCensus
from workers.shared.bus import LocalBus


def _census(bus: LocalBus, **timing: float) -> RoomCensus:
    census = RoomCensus("test#census", lambda: bus, **timing)
    census.start()
    return census


def test_counts_of_every_process_add_up_and_a_room_left_empty_stops_counting() -> None:
    bus = LocalBus()
    a, b = _census(bus), _census(bus)
    a.update("lobby", 3)
    b.update("lobby", 2)
    b.update("other", 1)
    assert a.total("lobby") == b.total("lobby") == 5
    assert a.total("other") == 1 and a.total("nobody") == 0
    b.update("lobby", 0)
    assert a.total("lobby") == 3


def test_a_process_that_starts_later_gets_the_others_counts_from_their_snapshots() -> None:
    bus = LocalBus()
    a = _census(bus)
    a.update("lobby", 4)
    a.update("side", 1)
    late = _census(bus)  # its hello asks everyone for a snapshot
    assert late.total("lobby") == 4 and late.total("side") == 1


def test_a_process_that_goes_silent_stops_counting_after_the_lease() -> None:
    bus = LocalBus()
    survivor = _census(bus, beat=0.05, lease=0.3)
    victim = _census(bus, beat=0.05, lease=0.3)
    survivor.update("lobby", 1)
    victim.update("lobby", 2)
    gevent.sleep(0.4)  # both beat: holding members keeps them counted
    assert survivor.total("lobby") == 3
    victim.stop()  # like kill -9: no goodbye, no more beats
    gevent.sleep(0.5)
    assert survivor.total("lobby") == 1


def test_a_lost_message_is_noticed_from_the_sequence_gap_and_repaired_by_a_snapshot() -> None:
    bus = LocalBus()
    a, b = _census(bus), _census(bus)
    b.update("lobby", 1)
    assert a._subscription is not None
    a._subscription.cancel()  # a misses what b says next
    b.update("lobby", 7)
    a._subscription = bus.subscribe(a.channel, a._receive)
    b.update("side", 1)  # a sees a gap, asks b, and b answers with everything
    assert a.total("lobby") == 7 and a.total("side") == 1


def test_an_older_count_overtaken_by_a_newer_one_does_not_win() -> None:
    bus = LocalBus()
    sender = _census(bus)
    said: list[bytes] = []
    bus.subscribe(sender.channel, said.append)
    sender.update("lobby", 3)
    sender.update("lobby", 2)  # members leaving together: each leave publishes a count
    sender.update("lobby", 1)
    listener = _census(LocalBus())  # on a bus of its own: it hears only what is fed here
    for payload in (said[0], said[2], said[1]):  # the last two published at once, swapped
        listener._receive(payload)
    assert listener.total("lobby") == 1


class _Member:
    """What a hub uses of a Channel or an EventStream: id, alive, sending, on_close."""

    def __init__(self, ident: str) -> None:
        self.id = ident
        self.alive = True
        self.received: list[bytes] = []
        self._on_close: list[Any] = []

    def on_close(self, fn: Any) -> None:
        self._on_close.append(fn)

    def send_frame(self, frame: bytes) -> bool:
        self.received.append(frame)
        return True

    write = send_frame  # the SSE side

    def die(self) -> None:
        self.alive = False
        for fn in self._on_close:
            fn(self, 1006, "")


def test_pulse_hubs_on_one_bus_share_room_sizes_and_deliver_each_broadcast_once() -> None:
    bus = LocalBus()
    worker_a, worker_b = pulse.Hub(bus=bus), pulse.Hub(bus=bus)
    a1, a2, b1 = _Member("1-1"), _Member("1-2"), _Member("2-1")
    for hub, member in ((worker_a, a1), (worker_a, a2), (worker_b, b1)):
        assert hub.join("lobby", member)  # type: ignore[arg-type]
    assert not worker_b.join("lobby", b1)  # type: ignore[arg-type]
    assert worker_a.room_size("lobby") == worker_b.room_size("lobby") == 3
    assert worker_a.local_size("lobby") == 2 and worker_b.local_size("lobby") == 1
    worker_b.broadcast_text("lobby", "hi", exclude=b1)  # type: ignore[arg-type]
    assert a1.received == a2.received == [frame_bytes(Opcode.TEXT, b"hi")]
    assert b1.received == []
    a2.die()
    assert worker_b.room_size("lobby") == 2
    assert worker_a.members("lobby") == [a1]


def test_sse_hubs_on_one_bus_share_room_sizes() -> None:
    bus = LocalBus()
    worker_a, worker_b = sse.Hub(bus=bus), sse.Hub(bus=bus)
    a1, b1, b2 = _Member("1-1"), _Member("2-1"), _Member("2-2")
    worker_a.join("news", a1)  # type: ignore[arg-type]
    worker_b.join("news", b1)  # type: ignore[arg-type]
    worker_b.join("news", b2)  # type: ignore[arg-type]
    assert worker_a.room_size("news") == worker_b.room_size("news") == 3
    worker_b.leave("news", b2)  # type: ignore[arg-type]
    assert worker_a.room_size("news") == 2
