"""In-process checks of the SSE encoder and of Hub membership, with the process-local bus."""

from __future__ import annotations

from typing import Any

from socketify.protocol.websocket import Opcode, frame_bytes
from socketify.realtime import pulse, sse
from workers.shared.bus import LocalBus


def test_encode_event_splits_data_on_crlf_lf_and_cr_and_keeps_fields_single_line() -> None:
    wire = sse.encode_event("a\r\nb\nc\rd", event="up\ndate", id=7)
    assert wire == b"id: 7\nevent: up date\ndata: a\ndata: b\ndata: c\ndata: d\n\n"
    assert sse.encode_event("") == b"data: \n\n"


class _FakeChannel:
    """Just what Hub uses of a Channel."""

    def __init__(self, ident: str) -> None:
        self.id = ident
        self.alive = True
        self.frames: list[bytes] = []
        self._on_close: list[Any] = []

    def on_close(self, fn: Any) -> None:
        self._on_close.append(fn)

    def send_frame(self, frame: bytes) -> bool:
        self.frames.append(frame)
        return True

    def die(self) -> None:
        self.alive = False
        for fn in self._on_close:
            fn(self, 1006, "")


def test_hub_ignores_duplicate_joins_honours_exclude_and_drops_closed_members() -> None:
    hub = pulse.Hub(bus=LocalBus())
    a, b = _FakeChannel("1-1"), _FakeChannel("1-2")
    assert hub.join("r", a) and hub.join("r", b)  # type: ignore[arg-type]
    assert not hub.join("r", a)  # type: ignore[arg-type]
    hub.broadcast_text("r", "hi", exclude=a)  # type: ignore[arg-type]
    assert a.frames == [] and b.frames == [frame_bytes(Opcode.TEXT, b"hi")]
    b.die()
    assert hub.room_size("r") == 1
    hub.broadcast_binary("r", b"\x00")
    assert a.frames == [frame_bytes(Opcode.BINARY, b"\x00")]
    hub.leave_all(a)  # type: ignore[arg-type]
    assert hub.room_size("r") == 0
