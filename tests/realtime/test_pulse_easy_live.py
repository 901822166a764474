"""pulse.easy and pulse.media against `socketify run --workers 2` with the `websockets` client."""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import Any

import pytest
from websockets.sync.client import ClientConnection, connect

from socketify.realtime.pulse import easy, media
from tests.support.serve import ServerProcess


def _ws(live: ServerProcess, target: str = "/easy") -> ClientConnection:
    return connect(f"ws://127.0.0.1:{live.port}{target}", open_timeout=5)


def _event(ws: ClientConnection, wanted: str | None = None) -> tuple[str, Any]:
    while True:
        parsed = easy.parse_envelope(ws.recv(timeout=5))
        assert parsed is not None
        if wanted is None or parsed[0] == wanted:
            return parsed


def _send(ws: ClientConnection, type: str, data: Any = None) -> None:
    ws.send(easy.envelope(type, data))


def _clients_on_both_workers(
    live: ServerProcess, stack: contextlib.ExitStack, per_worker: int = 2
) -> dict[int, list[ClientConnection]]:
    by_pid: dict[int, list[ClientConnection]] = {}
    for _ in range(80):
        ws = stack.enter_context(_ws(live))
        kind, data = _event(ws)
        assert kind == "hello"
        by_pid.setdefault(data["pid"], []).append(ws)
        if len(by_pid) == 2 and all(len(v) >= per_worker for v in by_pid.values()):
            return by_pid
    raise AssertionError(f"connections spread as { ({p: len(v) for p, v in by_pid.items()}) }")


def test_easy_rooms_span_workers_with_sizes_and_ordered_broadcasts(live: ServerProcess) -> None:
    room = uuid.uuid4().hex
    with contextlib.ExitStack() as stack:
        by_pid = _clients_on_both_workers(live, stack)
        everyone = [ws for members in by_pid.values() for ws in members]
        for ws in everyone:
            _send(ws, "join", {"room": room})
            assert _event(ws, "joined")[1]["room"] == room
        deadline = time.monotonic() + 5
        sizes: set[int] = set()
        while time.monotonic() < deadline:
            sizes = set()
            for ws in everyone:
                _send(ws, "size", {"room": room})
                sizes.add(_event(ws, "size")[1]["size"])
            if sizes == {len(everyone)}:
                break
        assert sizes == {len(everyone)}
        for n in range(20):
            _send(everyone[-1], "say", {"n": n})  # no room given: the default room
        for ws in everyone:
            assert [_event(ws, "said")[1]["n"] for _ in range(20)] == list(range(20))


def test_invalid_envelopes_get_an_error_event_and_a_quiet_route_drops_them(
    live: ServerProcess,
) -> None:
    with _ws(live) as ws:
        _event(ws, "hello")
        ws.send("this is not JSON")
        kind, data = _event(ws)
        assert (kind, data["error"]) == ("error", "invalid_envelope")
        _send(ws, "no-such-event", 1)
        assert _event(ws) == ("error", {"error": "unknown_type", "type": "no-such-event"})
    with _ws(live, "/easy/quiet") as ws:  # recorded after bind(), error events off
        _event(ws, "hello")
        ws.send("this is not JSON")
        _send(ws, "ping", [1, 2])
        assert _event(ws) == ("pong", [1, 2])


def test_media_frames_are_relayed_across_workers_with_the_clients_seq_and_timestamp(
    live: ServerProcess,
) -> None:
    room = f"call-{uuid.uuid4().hex}"
    with contextlib.ExitStack() as stack:
        by_pid = _clients_on_both_workers(live, stack, per_worker=1)
        first, second = (members[0] for members in by_pid.values())
        for ws in (first, second):
            _send(ws, "media", {"room": "call"})
            assert _event(ws, "media")[1]["room"] == "call"
            _send(ws, "join", {"room": room})  # a chat room too: media must not disturb it
            _event(ws, "joined")
        frames = [
            media.pack(media.Kind.VOICE, 3, 1000 + n, 123_456_789 + n, 0, bytes([n]) * 40)
            for n in range(10)
        ]
        frames.append(
            media.pack(media.Kind.IMAGE, 4, 77, 5, media.Flag.LAST, b"\x89PNG", "image/png")
        )
        for frame in frames:
            first.send(frame)
        assert [second.recv(timeout=5) for _ in frames] == frames  # bytes unchanged, in order
        with pytest.raises(TimeoutError):
            first.recv(timeout=0.2)  # relay_room skips the sender
        # Not media: the user's own binary handler answers, on the sender's worker.
        first.send(b"PM\x07" + frames[0][3:])
        assert first.recv(timeout=5) == b"user:PM\x07" + frames[0][3:]
        _send(second, "say", {"room": room, "text": "chat still works"})
        assert _event(first, "said")[1]["text"] == "chat still works"


def test_media_send_image_repacks_with_the_mime_and_a_server_seq(live: ServerProcess) -> None:
    with contextlib.ExitStack() as stack:
        by_pid = _clients_on_both_workers(live, stack, per_worker=1)
        first, second = (members[0] for members in by_pid.values())
        for ws in (first, second):
            _send(ws, "media", {"room": "gallery"})
            _event(ws, "media")
        first.send(media.pack(media.Kind.IMAGE, 0, 999, 1, media.Flag.LAST, b"GIF89a", "image/gif"))
        for ws in (first, second):  # send_image includes the sender
            frame = media.unpack(ws.recv(timeout=5))  # type: ignore[arg-type]
            assert frame is not None
            assert (frame.kind, frame.mime, frame.payload) == (
                media.Kind.IMAGE,
                "image/gif",
                b"GIF89a",
            )
            assert frame.seq != 999 and frame.is_last
