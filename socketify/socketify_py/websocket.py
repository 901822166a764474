"""socketify.py's WebSockets: `app.ws(path, behavior)`, `WebSocket`, `OpCode`, topics.

A behavior dict (`open`, `message`, `close`, `drain`, `ping`, `pong`, `compression`,
`max_payload_length`, `idle_timeout`, `max_backpressure`, `close_on_backpressure_limit`)
becomes a Socketify Pulse route (`socketify.realtime.pulse.routes.ws_handler`); each
connection's `Channel` gets one `WebSocket` face, kept in the channel's own `locals`, which
the callbacks receive as socketify.py passes it: `message(ws, message, opcode)` with `str` for
a text message and `bytes` for a binary one, `close(ws, code, message_bytes)`.

Topics are the rooms of one Pulse `Hub` per App: `ws.subscribe(topic)` joins, `ws.publish`
sends to every other subscriber and `app.publish` to all of them, on every worker, through the
cross-worker bus (the frame is encoded once per publish).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable
from contextvars import ContextVar
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from socketify.core.coroutines import blocking, is_async
from socketify.socketify_py.http import unsupported

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response
    from socketify.realtime.pulse.channel import Channel
    from socketify.realtime.pulse.hub import Hub

__all__ = ["CompressOptions", "OpCode", "SendStatus", "WebSocket", "ws_options", "ws_route"]


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


# The upgrade request being answered, while `open` runs for its new connection.
_upgrading: ContextVar[Request | None] = ContextVar("socketify_py_upgrading", default=None)

_STATUS = {"SENT": SendStatus.SUCCESS, "BACKPRESSURE": SendStatus.BACKPRESSURE}
_KEY = "socketify_py.websocket"


def _payload(message: Any) -> bytes:
    if isinstance(message, bytes):
        return message
    if isinstance(message, str):
        return message.encode("utf-8")
    if isinstance(message, bytearray | memoryview):
        return bytes(message)
    if message is None:
        return b""
    return json.dumps(message).encode("utf-8")


class WebSocket:
    """socketify.py's WebSocket: one per connection, over a Pulse `Channel` (`.channel`)."""

    __slots__ = ("channel", "hub", "remote_address")

    def __init__(self, channel: Channel, hub: Hub, remote_address: str | None = None) -> None:
        self.channel = channel
        self.hub = hub
        self.remote_address = remote_address

    @classmethod
    def of(cls, channel: Channel, hub: Hub) -> WebSocket:
        """The face of `channel`, made on first use and kept in the channel's locals.

        The first use is `open`, while the upgrade request is being answered: the face keeps
        what it needs of that request (the client's address).
        """
        found = channel.locals.get(_KEY)
        if found is None:
            request = _upgrading.get()
            address = request.remote_ip if request is not None else None
            found = channel.locals[_KEY] = cls(channel, hub, address)
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
        if opcode == OpCode.TEXT:
            text = message if isinstance(message, str) else _payload(message).decode("utf-8")
            status = self.channel.send_text(text)
        elif opcode == OpCode.BINARY:
            status = self.channel.send_binary(_payload(message))
        elif opcode == OpCode.PING:
            status = self.channel.ping(_payload(message))
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

    def get_user_data(self) -> None:
        """None: there is no `upgrade` behavior to attach data (use ws.channel.locals)."""
        return None

    # -- topics ----------------------------------------------------------------------------

    def subscribe(self, topic: str | bytes) -> bool:
        """Join `topic`; True when newly joined."""
        return self.hub.join(_topic(topic), self.channel)

    def unsubscribe(self, topic: str | bytes) -> bool:
        """Leave `topic`; True when it was joined."""
        return self.hub.leave(_topic(topic), self.channel)

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
        publish(self.hub, topic, message, opcode, exclude=self.channel)
        return True

    def send_fragment(self, *args: Any, **kwargs: Any) -> Any:
        """Not supported."""
        raise unsupported("ws.send_fragment", "send the whole message with ws.send")

    send_first_fragment = send_fragment
    send_last_fragment = send_fragment


def publish(
    hub: Hub, topic: str | bytes, message: Any, opcode: int, exclude: Channel | None = None
) -> None:
    """Broadcast `message` to `topic` as a TEXT or BINARY frame."""
    if opcode == OpCode.TEXT:
        text = message if isinstance(message, str) else _payload(message).decode("utf-8")
        hub.broadcast_text(_topic(topic), text, exclude=exclude)
    elif opcode == OpCode.BINARY:
        hub.broadcast_binary(_topic(topic), _payload(message), exclude=exclude)
    else:
        raise ValueError(f"publish sends TEXT or BINARY messages, not opcode {opcode}")


def _topic(topic: str | bytes) -> str:
    if isinstance(topic, bytes):
        return topic.decode("utf-8")
    if isinstance(topic, str):
        return topic
    raise TypeError(f"a topic is a str or bytes, not {type(topic).__name__}")


# Behavior keys socketify.py accepts that have no meaning here, with what to do instead.
_UNSUPPORTED = {
    "upgrade": "let app.ws() upgrade, and check the request before it in a Socketify"
    " middleware (app.use)",
    "subscription": "count subscribers with app.num_subscribers(topic)",
    "max_lifetime": "close long-lived connections from the app (ws.end)",
    "reset_idle_timeout_on_send": "only what the client sends resets the idle timer",
    "send_pings_automatically": "idle_timeout always pings a silent client before closing it",
}
_KNOWN = {
    "open",
    "message",
    "close",
    "drain",
    "ping",
    "pong",
    "compression",
    "max_payload_length",
    "idle_timeout",
    "max_backpressure",
    "close_on_backpressure_limit",
}


def ws_options(behavior: dict[str, Any], hub: Hub) -> dict[str, Any]:
    """The `Server.ws` keyword arguments for a socketify.py behavior dict."""
    if not isinstance(behavior, dict):
        raise TypeError("app.ws(path, behavior): behavior must be a dict")
    for key, value in behavior.items():
        if key in _UNSUPPORTED:
            if value:
                raise unsupported(f"the ws behavior {key!r}", _UNSUPPORTED[key])
        elif key not in _KNOWN:
            raise ValueError(f"unknown ws behavior {key!r}")
    idle = behavior.get("idle_timeout", 120)
    options: dict[str, Any] = {
        # socketify.py's defaults, where they differ from Socketify's own.
        "max_payload_length": behavior.get("max_payload_length", 16 * 1024),
        "idle_timeout": idle if idle else None,
        "max_backpressure": behavior.get("max_backpressure", 64 * 1024),
        "close_on_backpressure_limit": bool(behavior.get("close_on_backpressure_limit", False)),
        "compression": bool(behavior.get("compression", CompressOptions.DISABLED)),
    }
    # `open` always makes the connection's face, while the upgrade request is at hand.
    options["open"] = _with_face(behavior.get("open") or _ignore, hub)
    if behavior.get("drain") is not None:
        options["drain"] = _with_face(behavior["drain"], hub)
    message = behavior.get("message")
    if message is not None:
        options["message"] = _with_face(message, hub, _as_opcode)
    close = behavior.get("close")
    if close is not None:
        options["close"] = _with_face(close, hub, _as_close)
    for role in ("ping", "pong"):
        if behavior.get(role) is not None:
            options["open"] = _with_ping_pong(
                options.get("open"), role, _with_face(behavior[role], hub)
            )
    return options


def ws_route(behavior: dict[str, Any], hub: Hub) -> Callable[[Request, Response], Any]:
    """The GET handler of a socketify.py WebSocket route: upgrade, then the callbacks."""
    from socketify.realtime.pulse.routes import ws_handler

    upgrade = ws_handler(**ws_options(behavior, hub))

    def handler(req: Request, res: Response) -> Any:
        token = _upgrading.set(req)
        try:
            return upgrade(req, res)
        finally:
            _upgrading.reset(token)

    return handler


def _ignore(ws: WebSocket) -> None:
    """The `open` of a behavior that has none."""


def _with_face(
    callback: Callable[..., Any],
    hub: Hub,
    convert: Callable[..., tuple[Any, ...]] = lambda *rest: rest,
) -> Callable[..., Any]:
    """`callback(ws, *convert(*rest))` called as `(channel, *rest)`; async stays async."""
    if is_async(callback):

        async def call_async(channel: Channel, *rest: Any) -> Any:
            return await callback(WebSocket.of(channel, hub), *convert(*rest))

        return call_async

    def call(channel: Channel, *rest: Any) -> Any:
        return callback(WebSocket.of(channel, hub), *convert(*rest))

    return call


def _as_opcode(data: str | bytes, is_binary: bool) -> tuple[Any, ...]:
    """Socketify's `(data, is_binary)` as socketify.py's `(message, opcode)`."""
    return data, OpCode.BINARY if is_binary else OpCode.TEXT


def _as_close(code: int, reason: str) -> tuple[Any, ...]:
    """Socketify's `(code, reason)` as socketify.py's `(code, message_bytes)`."""
    return code, reason.encode("utf-8")


def _with_ping_pong(
    open: Callable[..., Any] | None, role: str, callback: Callable[..., Any]
) -> Callable[..., Any]:
    """An `open` that also wires `ping(ws, data)` or `pong(ws, data)` on the channel."""
    first = blocking(open, "the ws open callback") if open is not None else None

    def opened(channel: Channel) -> Any:
        (channel.on_ping if role == "ping" else channel.on_pong)(callback)
        return first(channel) if first is not None else None

    return opened
