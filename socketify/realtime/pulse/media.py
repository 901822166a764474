"""`pulse.media`: voice, video and image frames in the `PM` binary format.

Wire format of one binary WebSocket message, integers big-endian:

    magic "PM" | kind u8 | stream_id u16 | seq u32 | timestamp_us u64 | flags u8
    | mime_len u16 + mime (ASCII), image kinds (3, 4) only | payload (the rest)

Kinds: voice 1, video 2, image 3, image end 4. Flags: key frame 0x01, last 0x02.

Theory of operation. `MediaHub` keeps media rooms on a `pulse.Hub` (its own, or one shared
with a `pulse.easy` App), under a prefix (`"media:"`) so that joining or leaving a media room
never touches the chat room of the same name. It watches a joined channel's binary messages
through `Channel.tap_binary`: a valid frame goes to the handlers of every media room the
channel is in, anything else (not `PM`, an unknown kind) goes on to the channel's own
`on_binary` handler. Nothing is relayed unless a handler says so: `relay` re-sends the bytes
as received (the client's seq, timestamp and mime intact) and `relay_room` does that for
every frame of a room. The `send_*` methods pack new frames with this worker's sequence
counters and monotonic clock.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum, IntFlag
from typing import Any

from socketify.realtime.pulse.channel import Channel
from socketify.realtime.pulse.hub import Hub

__all__ = ["Flag", "Frame", "Kind", "MediaHub", "now_us", "pack", "unpack"]

MAGIC = b"PM"
_HEAD = struct.Struct(">2sBHIQB")  # magic, kind, stream_id, seq, timestamp_us, flags: 18 bytes
_MIME_LEN = struct.Struct(">H")
MAX_MIME = 0xFFFF


class Kind(IntEnum):
    """What a frame carries."""

    VOICE = 1
    VIDEO = 2
    IMAGE = 3
    IMAGE_END = 4


class Flag(IntFlag):
    """Frame flags."""

    NONE = 0
    KEY_FRAME = 0x01
    LAST = 0x02


_KINDS = frozenset(int(k) for k in Kind)
_IMAGE_KINDS = frozenset((Kind.IMAGE, Kind.IMAGE_END))


@dataclass(frozen=True)
class Frame:
    """One media frame; `raw` is the message it was read from (empty for a built one)."""

    kind: Kind
    stream_id: int
    seq: int
    timestamp_us: int
    flags: int = 0
    payload: bytes = b""
    mime: str = ""
    raw: bytes = field(default=b"", compare=False, repr=False)

    @property
    def is_key_frame(self) -> bool:
        """True when the key-frame flag is set."""
        return bool(self.flags & Flag.KEY_FRAME)

    @property
    def is_last(self) -> bool:
        """True when the last-chunk flag is set."""
        return bool(self.flags & Flag.LAST)

    def encode(self) -> bytes:
        """The wire bytes (the received ones when this frame was read from the wire)."""
        if self.raw:
            return self.raw
        return pack(
            self.kind, self.stream_id, self.seq, self.timestamp_us, self.flags,
            self.payload, self.mime,
        )  # fmt: skip


def pack(
    kind: int,
    stream_id: int,
    seq: int,
    timestamp_us: int,
    flags: int = 0,
    payload: bytes | bytearray | memoryview = b"",
    mime: str = "",
) -> bytes:
    """Encode one frame; a mime is written for image kinds only (at most 65535 bytes)."""
    if kind not in _KINDS:
        raise ValueError(f"unknown media kind {kind}")
    head = _HEAD.pack(MAGIC, kind, stream_id, seq & 0xFFFFFFFF, timestamp_us, flags)
    if kind in _IMAGE_KINDS:
        encoded = mime.encode("ascii")[:MAX_MIME]
        head += _MIME_LEN.pack(len(encoded)) + encoded
    return head + bytes(payload)


def unpack(data: bytes | bytearray | memoryview) -> Frame | None:
    """Decode one frame, or None: too short, wrong magic, unknown kind, truncated mime."""
    data = bytes(data)
    if len(data) < _HEAD.size:
        return None
    magic, kind, stream_id, seq, timestamp_us, flags = _HEAD.unpack_from(data)
    if magic != MAGIC or kind not in _KINDS:
        return None
    offset = _HEAD.size
    mime = ""
    if kind in _IMAGE_KINDS:
        if len(data) < offset + 2:
            return None
        (size,) = _MIME_LEN.unpack_from(data, offset)
        offset += 2
        if len(data) < offset + size:
            return None
        try:
            mime = data[offset : offset + size].decode("ascii")
        except UnicodeDecodeError:
            return None
        offset += size
    return Frame(Kind(kind), stream_id, seq, timestamp_us, flags, data[offset:], mime, data)


def now_us() -> int:
    """Microseconds on the monotonic clock (timestamps for ordering, not wall time)."""
    return time.monotonic_ns() // 1000


FrameHandler = Callable[[Channel, Frame], Any]


class MediaHub:
    """Media rooms: inbound frames to per-room handlers, outbound frames broadcast once."""

    def __init__(self, rooms: Hub | None = None, *, prefix: str = "media:") -> None:
        self.rooms = rooms if rooms is not None else Hub(name="pulse.media")
        self.prefix = prefix
        self._joined: dict[str, dict[str, None]] = {}  # channel id -> its media rooms, in order
        self._handlers: dict[tuple[str, Kind], FrameHandler] = {}
        self._seq: dict[str, int] = {}
        self._image_mime: dict[tuple[str, int], str] = {}

    # -- membership ---------------------------------------------------------------------------

    def attach(self, ch: Channel) -> None:
        """Watch `ch`'s binary messages for media frames (once; `join` does it)."""
        if ch.id in self._joined:
            return
        self._joined[ch.id] = {}
        ch.tap_binary(self._take)
        ch.on_close(lambda c, code, reason: self._joined.pop(c.id, None))

    def join(self, room: str, ch: Channel) -> bool:
        """Add `ch` to media room `room` (a channel may be in several); False if dead."""
        if not ch.alive:
            return False
        self.attach(ch)
        self._joined[ch.id][room] = None
        self.rooms.join(self.prefix + room, ch)
        return True

    def leave(self, room: str, ch: Channel) -> bool:
        """Remove `ch` from media room `room`; False if it was not in it."""
        rooms = self._joined.get(ch.id)
        if rooms is None or room not in rooms:
            return False
        del rooms[room]
        self.rooms.leave(self.prefix + room, ch)
        return True

    def rooms_of(self, ch: Channel) -> list[str]:
        """The media rooms `ch` is in, in the order it joined them."""
        return list(self._joined.get(ch.id, ()))

    def room_size(self, room: str) -> int:
        """Members of media room `room` on every worker."""
        return self.rooms.room_size(self.prefix + room)

    # -- inbound ------------------------------------------------------------------------------

    def on_voice(self, room: str, fn: FrameHandler) -> FrameHandler:
        """`fn(ch, frame)` for voice frames sent by members of `room` (replaces)."""
        self._handlers[(room, Kind.VOICE)] = fn
        return fn

    def on_video(self, room: str, fn: FrameHandler) -> FrameHandler:
        """`fn(ch, frame)` for video frames sent by members of `room` (replaces)."""
        self._handlers[(room, Kind.VIDEO)] = fn
        return fn

    def on_image(self, room: str, fn: FrameHandler) -> FrameHandler:
        """`fn(ch, frame)` for image and image-end frames from members of `room` (replaces)."""
        self._handlers[(room, Kind.IMAGE)] = fn
        return fn

    def relay_room(self, room: str, *, include_sender: bool = False) -> None:
        """Relay every frame a member of `room` sends to the room, bytes unchanged."""

        def relay(ch: Channel, frame: Frame) -> None:
            self.relay(room, frame, exclude=None if include_sender else ch)

        for kind in (Kind.VOICE, Kind.VIDEO, Kind.IMAGE):
            self._handlers[(room, kind)] = relay

    def _take(self, ch: Channel, data: bytes) -> bool:
        rooms = self._joined.get(ch.id)
        if not rooms:
            return False
        frame = unpack(data)
        if frame is None:
            return False  # not media: the channel's own on_binary handler gets it
        kind = Kind.IMAGE if frame.kind is Kind.IMAGE_END else frame.kind
        for room in list(rooms):
            handler = self._handlers.get((room, kind))
            if handler is not None:
                handler(ch, frame)
        return True

    # -- outbound -----------------------------------------------------------------------------

    def relay(self, room: str, frame: Frame, *, exclude: Channel | None = None) -> bool:
        """Broadcast `frame` to `room` as it was received (seq, timestamp and mime kept)."""
        self.rooms.broadcast_binary(self.prefix + room, frame.encode(), exclude)
        return True

    def send_voice(
        self,
        room: str,
        pcm: bytes,
        stream_id: int = 0,
        flags: int = 0,
        *,
        exclude: Channel | None = None,
    ) -> bool:
        """Broadcast a new voice frame (this worker's seq for `room:v:<stream_id>`)."""
        return self._send(room, f"v:{stream_id}", Kind.VOICE, stream_id, flags, pcm, "", exclude)

    def send_video(
        self,
        room: str,
        data: bytes,
        keyframe: bool = False,
        stream_id: int = 0,
        *,
        exclude: Channel | None = None,
    ) -> bool:
        """Broadcast a new video frame, flagged as a key frame when `keyframe`."""
        flags = Flag.KEY_FRAME if keyframe else 0
        return self._send(room, f"vid:{stream_id}", Kind.VIDEO, stream_id, flags, data, "", exclude)

    def send_image(
        self,
        room: str,
        data: bytes,
        mime: str = "image/jpeg",
        flags: int = Flag.LAST,
        *,
        exclude: Channel | None = None,
    ) -> bool:
        """Broadcast a whole image in one frame (stream 0)."""
        return self._send(room, "img", Kind.IMAGE, 0, flags, data, mime, exclude)

    def begin_image(
        self,
        room: str,
        mime: str = "image/jpeg",
        stream_id: int = 0,
        *,
        exclude: Channel | None = None,
    ) -> bool:
        """Start a chunked image: an empty image frame carrying its mime."""
        self._image_mime[(room, stream_id)] = mime
        key = f"img:{stream_id}"
        return self._send(room, key, Kind.IMAGE, stream_id, 0, b"", mime, exclude)

    def write_image(
        self, room: str, chunk: bytes, stream_id: int = 0, *, exclude: Channel | None = None
    ) -> bool:
        """Send one chunk of the image begun on `stream_id`."""
        key = f"img:{stream_id}"
        return self._send(room, key, Kind.IMAGE, stream_id, 0, chunk, "", exclude)

    def end_image(self, room: str, stream_id: int = 0, *, exclude: Channel | None = None) -> bool:
        """End the chunked image: an image-end frame with the mime `begin_image` was given."""
        mime = self._image_mime.pop((room, stream_id), "")
        key = f"img:{stream_id}"
        return self._send(room, key, Kind.IMAGE_END, stream_id, Flag.LAST, b"", mime, exclude)

    def _send(
        self,
        room: str,
        key: str,
        kind: Kind,
        stream_id: int,
        flags: int,
        payload: bytes,
        mime: str,
        exclude: Channel | None,
    ) -> bool:
        counter = f"{room}:{key}"
        seq = self._seq[counter] = (self._seq.get(counter, 0) + 1) & 0xFFFFFFFF
        frame = pack(kind, stream_id, seq, now_us(), flags, payload, mime)
        self.rooms.broadcast_binary(self.prefix + room, frame, exclude)
        return True
