"""`Hub`: Pulse rooms; a broadcast is one WebSocket frame, encoded once, for every member.

The rooms themselves (membership per worker, the bus, room sizes across workers and hosts,
big broadcasts in parts, leaving on close) are `socketify.realtime.rooms.Rooms`; this module
only says how a Pulse member is written to: the frame bytes as they are, through
`Channel.send_frame`, which bounds the member's backlog (`max_backpressure`) like any send.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from socketify.protocol.websocket import Opcode, frame_bytes
from socketify.realtime.pulse.channel import Channel
from socketify.realtime.rooms import Rooms, Sender

__all__ = ["Hub"]


class Hub(Rooms[Channel]):
    """Rooms of Pulse channels; broadcasts reach the members on every worker through the bus."""

    def __init__(self, name: str = "pulse", bus: Any = None) -> None:
        super().__init__(name, bus)

    def sender_for(self, member: Channel) -> Sender:
        """`member.send_frame`: frame bytes written as they are, corked per loop turn."""
        return member.send_frame

    def watch_close(self, member: Channel, gone: Callable[[Channel], object]) -> None:
        """Call `gone(member)` from the channel's `on_close`."""
        member.on_close(lambda ch, code, reason: gone(ch))

    def broadcast_text(self, room: str, text: str, exclude: Channel | None = None) -> None:
        """Send a text message to every member of `room` on every worker."""
        self.publish(room, frame_bytes(Opcode.TEXT, text.encode("utf-8")), exclude)

    def broadcast_binary(self, room: str, data: bytes, exclude: Channel | None = None) -> None:
        """Send a binary message to every member of `room` on every worker."""
        self.publish(room, frame_bytes(Opcode.BINARY, data), exclude)

    def broadcast_frame(self, room: str, frame: bytes, exclude: Channel | None = None) -> None:
        """Send a frame encoded once (`frame_bytes`) to every member of `room` everywhere."""
        self.publish(room, frame, exclude)
