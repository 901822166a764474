"""socketify.py's `WebSocket`, `OpCode`, `SendStatus`, `CompressOptions`, and its topics.

Each connection's Pulse `Channel` gets one `WebSocket` face, kept in the channel's own
`locals` (`socketify.socketify_py.behaviors` makes the route and hands the face to the
behavior's callbacks).

Topics are the rooms of one Pulse `Hub` per App: `ws.subscribe(topic)` joins, `ws.publish`
sends to every other subscriber and `app.publish` to all of them, on every worker, through the
cross-worker bus (the frame is encoded once per publish). A `subscription(ws, topic,
subscribers, subscribers_before)` behavior is called when a connection joins or leaves a
topic, with this worker's counts (uWebSockets counts per process too).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from socketify.socketify_py.errors import unsupported
from socketify.socketify_py.response import JsonSerializer

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.realtime.pulse.channel import Channel
    from socketify.realtime.pulse.hub import Hub

__all__ = ["UPGRADING", "CompressOptions", "OpCode", "SendStatus", "Topics", "WebSocket", "publish"]


class OpCode(IntEnum):
    """WebSocket opcodes, as socketify.py numbers them (RFC 6455's)."""

    CONTINUATION = 0
    TEXT = 1
    BINARY = 2
    CLOSE = 8
    PING = 9
    PONG = 10


class SendStatus(IntEnum):
    """What a send did, as socketify.py names it."""

    BACKPRESSURE = 0
    SUCCESS = 1
    DROPPED = 2


class CompressOptions(IntEnum):
    """uWebSockets' compression modes; any but DISABLED turns permessage-deflate on.

    Socketify negotiates permessage-deflate with the client's window bits; the dedicated
    sizes and the shared compressor are uWebSockets' memory trade-offs and mean the same here.
    """

    DISABLED = 0
    SHARED_COMPRESSOR = 1
    SHARED_DECOMPRESSOR = 1 << 8
    DEDICATED_DECOMPRESSOR_32KB = 15 << 8
    DEDICATED_DECOMPRESSOR_16KB = 14 << 8
    DEDICATED_DECOMPRESSOR_8KB = 13 << 8
    DEDICATED_DECOMPRESSOR_4KB = 12 << 8
    DEDICATED_DECOMPRESSOR_2KB = 11 << 8
    DEDICATED_DECOMPRESSOR_1KB = 10 << 8
    DEDICATED_DECOMPRESSOR_512B = 9 << 8
    DEDICATED_DECOMPRESSOR = 15 << 8
    DEDICATED_COMPRESSOR_3KB = 9 << 4 | 1
    DEDICATED_COMPRESSOR_4KB = 9 << 4 | 2
    DEDICATED_COMPRESSOR_8KB = 10 << 4 | 3
    DEDICATED_COMPRESSOR_16KB = 11 << 4 | 4
    DEDICATED_COMPRESSOR_32KB = 12 << 4 | 5
    DEDICATED_COMPRESSOR_64KB = 13 << 4 | 6
    DEDICATED_COMPRESSOR_128KB = 14 << 4 | 7
    DEDICATED_COMPRESSOR_256KB = 15 << 4 | 8
    DEDICATED_COMPRESSOR = 15 << 4 | 8


# The upgrade request being answered and its user data, while `open` runs for its connection.
UPGRADING: ContextVar[tuple[Request, Any] | None] = ContextVar(
    "socketify_py_upgrading", default=None
)

_STATUS = {"SENT": SendStatus.SUCCESS, "BACKPRESSURE": SendStatus.BACKPRESSURE}
_KEY = "socketify_py.websocket"


def _payload(message: Any, serializer: JsonSerializer = json) -> bytes:
    if isinstance(message, bytes):
        return message
    if isinstance(message, str):
        return message.encode("utf-8")
    if isinstance(message, bytearray | memoryview):
        return bytes(message)
    if message is None:
        return b""
    encoded = serializer.dumps(message)
    return encoded.encode("utf-8") if isinstance(encoded, str) else bytes(encoded)


@dataclass(frozen=True)
class Topics:
    """What the connections of one ws route share: the App's Hub, the JSON serializer, the
    `subscription` behavior and the class of the faces (with the App's extensions)."""

    hub: Hub
    serializer: JsonSerializer = json
    subscription: Callable[..., Any] | None = None
    face: type[WebSocket] = field(default_factory=lambda: WebSocket)


class WebSocket:
    """socketify.py's WebSocket: one per connection, over a Pulse `Channel` (`.channel`)."""

    __slots__ = ("channel", "remote_address", "topics", "user_data")

    def __init__(
        self,
        channel: Channel,
        topics: Topics,
        remote_address: str | None = None,
        user_data: Any = None,
    ) -> None:
        self.channel = channel
        self.topics = topics
        self.remote_address = remote_address
        self.user_data = user_data

    @property
    def hub(self) -> Hub:
        """The Hub whose rooms are the topics."""
        return self.topics.hub

    @classmethod
    def of(cls, channel: Channel, topics: Topics) -> WebSocket:
        """The face of `channel`, made on first use and kept in the channel's locals.

        The first use is `open`, while the upgrade request is being answered: the face keeps
        what it needs of that request (the client's address, the upgrade's user data).
        """
        found = channel.locals.get(_KEY)
        if found is None:
            upgrading = UPGRADING.get()
            request, user_data = upgrading if upgrading is not None else (None, None)
            address = request.remote_ip if request is not None else None
            found = channel.locals[_KEY] = cls(channel, topics, address, user_data)
        return found

    # -- sending ---------------------------------------------------------------------------

    def send(
        self,
        message: Any,
        opcode: int = OpCode.BINARY,
        compress: bool = False,
        fin: bool = True,
    ) -> SendStatus:
        """Send one message: TEXT or BINARY (socketify.py's default), JSON for other types.

        `compress` is decided per connection: messages are deflated when the client
        negotiated permessage-deflate and the route enabled compression.
        """
        if not fin:
            raise unsupported("ws.send(fin=False)", "send the whole message in one call")
        serializer = self.topics.serializer
        if opcode == OpCode.TEXT:
            text = (
                message
                if isinstance(message, str)
                else _payload(message, serializer).decode("utf-8")
            )
            status = self.channel.send_text(text)
        elif opcode == OpCode.BINARY:
            status = self.channel.send_binary(_payload(message, serializer))
        elif opcode == OpCode.PING:
            status = self.channel.ping(_payload(message, serializer))
        else:
            raise ValueError(f"ws.send sends TEXT, BINARY or PING messages, not opcode {opcode}")
        return _STATUS.get(getattr(status, "name", ""), SendStatus.DROPPED)

    def cork_send(
        self, message: Any, opcode: int = OpCode.BINARY, compress: bool = False, fin: bool = True
    ) -> WebSocket:
        """`send()`: frames sent in one loop turn already go out in one write."""
        self.send(message, opcode, compress, fin)
        return self

    def cork(self, callback: Callable[[WebSocket], Any]) -> None:
        """Call `callback(ws)` now: sends in one loop turn are gathered anyway."""
        callback(self)

    def end(self, code: int = 1000, message: Any = None) -> WebSocket:
        """Close with the close handshake: `code` and a reason."""
        reason = message if isinstance(message, str) else _payload(message).decode("utf-8")
        self.channel.close(code or 1000, reason)
        return self

    def close(self) -> WebSocket:
        """Close the connection (socketify.py: at once; here with a 1000 close handshake)."""
        self.channel.close()
        return self

    def get_buffered_amount(self) -> int:
        """Bytes sent but not yet taken by the kernel."""
        return self.channel.pending_bytes

    def get_remote_address(self) -> str | None:
        """The client's address as text."""
        return self.remote_address

    def get_remote_address_bytes(self) -> bytes | None:
        """The client's address, packed (4 bytes for IPv4, 16 for IPv6)."""
        try:
            return ipaddress.ip_address(self.remote_address or "").packed
        except ValueError:
            return None

    def get_user_data_uuid(self) -> str:
        """An id of this connection (socketify.py's key of its user data)."""
        return str(self.channel.id)

    def clone(self) -> WebSocket:
        """This face: it lives as long as the connection (check `ws.channel.alive`)."""
        return self

    def cork_end(self, code: int = 1000, message: Any = None) -> WebSocket:
        """`end()`: frames written in one loop turn go out in one write anyway."""
        return self.end(code, message)

    def get_user_data(self) -> Any:
        """What the `upgrade` behavior gave `res.upgrade(..., user_data)` (None without one)."""
        return self.user_data

    # -- topics ----------------------------------------------------------------------------

    def subscribe(self, topic: str | bytes) -> bool:
        """Join `topic`; True when newly joined."""
        name = _topic(topic)
        joined = bool(self.hub.join(name, self.channel))
        if joined:
            self.tell_subscription(name, +1)
        return joined

    def unsubscribe(self, topic: str | bytes) -> bool:
        """Leave `topic`; True when it was joined."""
        name = _topic(topic)
        left = bool(self.hub.leave(name, self.channel))
        if left:
            self.tell_subscription(name, -1)
        return left

    def tell_subscription(self, topic: str, change: int) -> None:
        """Call the `subscription` behavior: (ws, topic, subscribers, subscribers before)."""
        callback = self.topics.subscription
        if callback is not None:
            now = self.hub.local_size(topic)
            callback(self, topic, now, now - change)

    def tell_closing(self) -> None:
        """Call the `subscription` behavior for each topic the closing connection leaves."""
        callback = self.topics.subscription
        if callback is not None:
            for topic in self.get_topics():
                before = self.hub.local_size(topic)
                callback(self, topic, before - 1, before)

    def is_subscribed(self, topic: str | bytes) -> bool:
        """True when this connection is subscribed to `topic`."""
        return _topic(topic) in self.hub.rooms(self.channel)

    def get_topics(self) -> list[str]:
        """The topics this connection is subscribed to."""
        return sorted(self.hub.rooms(self.channel))

    def for_each_topic(self, handler: Callable[[str], Any]) -> None:
        """Call `handler(topic)` for each subscribed topic."""
        for topic in self.get_topics():
            handler(topic)

    def publish(
        self, topic: str | bytes, message: Any, opcode: int = OpCode.BINARY, compress: bool = False
    ) -> bool:
        """Send to every other subscriber of `topic`, on every worker (not to this one)."""
        publish(self.hub, topic, message, opcode, self.topics.serializer, exclude=self.channel)
        return True

    def send_fragment(self, *args: Any, **kwargs: Any) -> Any:
        """Not supported."""
        raise unsupported("ws.send_fragment", "send the whole message with ws.send")

    send_first_fragment = send_fragment
    send_last_fragment = send_fragment


def publish(
    hub: Hub,
    topic: str | bytes,
    message: Any,
    opcode: int,
    serializer: JsonSerializer = json,
    exclude: Channel | None = None,
) -> None:
    """Broadcast `message` to `topic` as a TEXT or BINARY frame."""
    if opcode == OpCode.TEXT:
        text = (
            message if isinstance(message, str) else _payload(message, serializer).decode("utf-8")
        )
        hub.broadcast_text(_topic(topic), text, exclude=exclude)
    elif opcode == OpCode.BINARY:
        hub.broadcast_binary(_topic(topic), _payload(message, serializer), exclude=exclude)
    else:
        raise ValueError(f"publish sends TEXT or BINARY messages, not opcode {opcode}")


def _topic(topic: str | bytes) -> str:
    if isinstance(topic, bytes):
        return topic.decode("utf-8")
    if isinstance(topic, str):
        return topic
    raise TypeError(f"a topic is a str or bytes, not {type(topic).__name__}")
