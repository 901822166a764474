"""Broadcasts over the bus's record limit go in parts and come back whole, in order."""

from __future__ import annotations

import os

from socketify.protocol.websocket import Opcode, frame_bytes
from socketify.realtime import bus_parts, pulse, sse
from workers.shared.bus import LocalBus


class _SmallBus(LocalBus):
    """The in-process bus with a record limit, like the worker bus but tiny."""

    max_payload = 64

    def __init__(self) -> None:
        super().__init__()
        self.records = 0

    def publish(self, channel: str, payload: bytes) -> None:
        assert len(payload) <= self.max_payload, "a record over the bus limit"
        self.records += 1
        super().publish(channel, payload)


class _Member:
    def __init__(self, ident: str) -> None:
        self.id = ident
        self.alive = True
        self.received: list[bytes] = []

    def on_close(self, fn: object) -> None:
        pass

    def send_frame(self, frame: bytes) -> bool:
        self.received.append(frame)
        return True

    write = send_frame


def test_a_big_pulse_broadcast_goes_in_parts_and_arrives_whole_before_the_next() -> None:
    bus = _SmallBus()
    worker_a, worker_b = pulse.Hub(bus=bus), pulse.Hub(bus=bus)
    a, b = _Member("1-1"), _Member("2-1")
    worker_a.join("r", a)  # type: ignore[arg-type]
    worker_b.join("r", b)  # type: ignore[arg-type]
    big = os.urandom(1000)
    before = bus.records
    worker_a.broadcast_binary("r", big)
    assert bus.records - before > 10  # it really was split
    worker_a.broadcast_text("r", "next")
    expected = [frame_bytes(Opcode.BINARY, big), frame_bytes(Opcode.TEXT, b"next")]
    assert a.received == b.received == expected


def test_a_big_sse_event_goes_in_parts_and_arrives_whole() -> None:
    bus = _SmallBus()
    worker_a, worker_b = sse.Hub(bus=bus), sse.Hub(bus=bus)
    b = _Member("2-1")
    worker_b.join("news", b)  # type: ignore[arg-type]
    worker_a.broadcast("news", "x" * 500, event="long")
    assert b.received == [sse.encode_event("x" * 500, event="long")]


def test_parts_of_interleaved_messages_join_per_message_and_a_gap_loses_only_that_one() -> None:
    bus = LocalBus()
    records: list[bytes] = []
    bus.subscribe("c", records.append)
    bus.max_payload = 40  # type: ignore[attr-defined]
    bus_parts.publish(bus, "c", b"A" * 100)
    bus_parts.publish(bus, "c", b"B" * 100)
    first, second = records[: len(records) // 2], records[len(records) // 2 :]
    joiner = bus_parts.PartJoiner()
    joined = [joiner.add(r) for pair in zip(first, second, strict=True) for r in pair]
    assert [w for w in joined if w is not None] == [b"A" * 100, b"B" * 100]
    assert [joiner.add(r) for r in first[:1] + first[2:]] == [None] * (len(first) - 1)
    assert [joiner.add(r) for r in second][-1] == b"B" * 100
