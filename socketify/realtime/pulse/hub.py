"""`Hub`: Pulse rooms whose broadcasts reach members on every worker (DESIGN §4, issue 6).

Theory of operation. A broadcast encodes the frame once and publishes those bytes once on
the cross-worker bus, prefixed by the id of the channel to skip (`exclude=`, usually the
sender). Each worker subscribes to a room's bus channel while it has local members and
writes the bytes to each of them as they are, so a thousand members cost one encoding and a
thousand non-blocking socket writes. Members are keyed by channel id, so joining twice is
harmless, and a closed channel leaves its rooms through its `on_close` callback. A frame too
big for one bus message travels in parts (`socketify.realtime.pulse.bus_parts`).

`room_size` counts the members on every worker (and host): each worker's `RoomCensus` tells
the others its per-room counts over the same bus, and a worker that stops beating (killed
with -9) stops counting after a lease (`socketify.realtime.pulse.census`).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from socketify.protocol.websocket import Opcode, frame_bytes
from socketify.realtime.pulse import bus_parts
from socketify.realtime.pulse.census import RoomCensus
from socketify.realtime.pulse.channel import Channel
from socketify.state.shared_bus import default_bus

__all__ = ["Hub"]


class Hub:
    """Rooms of channels; broadcasts span all workers through the bus."""

    def __init__(self, name: str = "pulse", bus: Any = None) -> None:
        self.name = name
        self._bus = bus
        self._rooms: dict[str, dict[str, Channel]] = {}
        self._subscriptions: dict[str, Any] = {}
        self._joined: dict[str, set[str]] = {}  # channel id -> its rooms, for leave_all
        self._parts = bus_parts.PartJoiner()  # broadcasts too big for one bus message
        self.census = RoomCensus(f"{name}#census", self.bus)
        if _in_worker():
            self.census.start()  # hear the other workers' counts before the first room_size

    def bus(self) -> Any:
        """The bus broadcasts go through (the process's default bus unless given one)."""
        # The default bus is resolved per process: a hub built before a fork (`--preload`)
        # must not keep publishing on its parent's bus.
        return self._bus if self._bus is not None else default_bus()

    def join(self, room: str, ch: Channel) -> bool:
        """Add `ch` to `room`; False if it is closed or already a member."""
        if not ch.alive:
            return False
        members = self._rooms.get(room)
        if members is None:
            members = self._rooms[room] = {}
            self._subscriptions[room] = self.bus().subscribe(
                f"{self.name}:{room}", partial(self._deliver, room)
            )
        if ch.id in members:
            return False
        members[ch.id] = ch
        rooms = self._joined.get(ch.id)
        if rooms is None:
            rooms = self._joined[ch.id] = set()
            ch.on_close(lambda c, code, reason: self.leave_all(c))
        rooms.add(room)
        self.census.update(room, len(members))
        return True

    def leave(self, room: str, ch: Channel) -> bool:
        """Remove `ch` from `room`; False if it was not a member."""
        members = self._rooms.get(room)
        if members is None or members.pop(ch.id, None) is None:
            return False
        rooms = self._joined.get(ch.id)
        if rooms is not None:
            rooms.discard(room)
        self.census.update(room, len(members))
        if not members:
            # The worker's last member left: stop receiving this room's broadcasts.
            del self._rooms[room]
            handle = self._subscriptions.pop(room, None)
            if handle is not None:
                handle.cancel()
        return True

    def leave_all(self, ch: Channel) -> None:
        """Remove `ch` from every room."""
        for room in list(self._joined.pop(ch.id, ())):
            self.leave(room, ch)

    def room_size(self, room: str) -> int:
        """Members of `room` on every worker (and host); `local_size` for this worker only."""
        return self.census.total(room)

    def local_size(self, room: str) -> int:
        """Members of `room` connected to this worker."""
        return len(self._rooms.get(room, ()))

    def members(self, room: str) -> list[Channel]:
        """A snapshot of this worker's members of `room`."""
        return list(self._rooms.get(room, {}).values())

    def rooms(self, ch: Channel) -> set[str]:
        """The rooms `ch` is in."""
        return set(self._joined.get(ch.id, ()))

    def broadcast_text(self, room: str, text: str, exclude: Channel | None = None) -> None:
        """Send a text message to every member of `room` on every worker."""
        self.broadcast_frame(room, frame_bytes(Opcode.TEXT, text.encode("utf-8")), exclude)

    def broadcast_binary(self, room: str, data: bytes, exclude: Channel | None = None) -> None:
        """Send a binary message to every member of `room` on every worker."""
        self.broadcast_frame(room, frame_bytes(Opcode.BINARY, data), exclude)

    def broadcast_frame(self, room: str, frame: bytes, exclude: Channel | None = None) -> None:
        """Send a frame encoded once (`frame_bytes`) to every member of `room` everywhere."""
        skip = exclude.id.encode("ascii") if exclude is not None else b""
        payload = bytes((len(skip),)) + skip + frame
        bus_parts.publish(self.bus(), f"{self.name}:{room}", payload)

    def _deliver(self, room: str, payload: bytes) -> None:
        if payload[0] == bus_parts.PART_MARK:
            whole = self._parts.add(payload)
            if whole is None:
                return
            payload = whole
        n = payload[0]
        skip = payload[1 : 1 + n].decode("ascii")
        frame = payload[1 + n :]
        for ch_id, ch in list(self._rooms.get(room, {}).items()):
            if ch_id != skip:
                ch.send_frame(frame)  # a dead member leaves through its on_close callback


def _in_worker() -> bool:
    from workers.shared.bus import bus

    return bus() is not None
