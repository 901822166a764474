"""socketify.py's WebSockets: `app.ws(path, behavior)`, `WebSocket`, `OpCode`, topics.

A behavior dict (`open`, `message`, `close`, `drain`, `ping`, `pong`, `compression`,
`max_payload_length`, `idle_timeout`, `max_backpressure`, `close_on_backpressure_limit`)
becomes a Socketify Pulse route (`socketify.realtime.pulse.routes.ws_handler`); each
connection's `Channel` gets one `WebSocket` face, kept in the channel's own `locals`, which
the callbacks receive as socketify.py passes it: `message(ws, message, opcode)` with `str` for
a text message and `bytes` for a binary one, `close(ws, code, message_bytes)`.

Topics are the rooms of one Pulse `Hub` per App: `ws.subscribe(topic)` joins, `ws.publish`
sends to every other subscriber and `app.publish` to all of them, on every worker, through the
cross-worker bus (the frame is encoded once per publish). A `subscription(ws, topic,
subscribers, subscribers_before)` behavior is called when a connection joins or leaves a
topic, with this worker's counts (uWebSockets counts per process too).

An `upgrade(res, req, socket_context)` behavior decides whether to accept the upgrade, sync
or `async def`: it calls `res.upgrade(key, protocol, extensions, socket_context,
user_data)` to accept, or answers the request itself to refuse. The handshake is made once
it returns, in the request's greenlet, from the request's own headers; `ws.get_user_data()`
returns the `user_data` it gave.
"""

from __future__ import annotations

import asyncio
import inspect
import ipaddress
import json
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from socketify.core.coroutines import blocking, is_async, runner
from socketify.socketify_py.http import AppRequest, AppResponse, JsonSerializer, unsupported

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response
    from socketify.realtime.pulse.channel import Channel
    from socketify.realtime.pulse.hub import Hub
    from socketify.socketify_py.app import App

__all__ = [
    "CompressOptions",
    "OpCode",
    "SendStatus",
    "SocketContext",
    "Topics",
    "WebSocket",
    "ws_options",
    "ws_route",
]


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
_upgrading: ContextVar[tuple[Request, Any] | None] = ContextVar(
    "socketify_py_upgrading", default=None
)

DRAIN_POLL = 0.005  # seconds between looks at what `open` left to write

_STATUS = {"SENT": SendStatus.SUCCESS, "BACKPRESSURE": SendStatus.BACKPRESSURE}
_KEY = "socketify_py.websocket"
_DRAIN_KEY = "socketify_py.drain_after_open"


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
    """What the connections of one ws route share: the App's Hub, the JSON serializer and
    the `subscription` behavior."""

    hub: Hub
    serializer: JsonSerializer = json
    subscription: Callable[..., Any] | None = None


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
            upgrading = _upgrading.get()
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


# Behavior keys socketify.py accepts that have no meaning here, with what to do instead.
_UNSUPPORTED = {
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
    "upgrade",
    "subscription",
    "compression",
    "max_payload_length",
    "idle_timeout",
    "max_backpressure",
    "close_on_backpressure_limit",
}


def ws_options(behavior: dict[str, Any], topics: Topics) -> dict[str, Any]:
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
    options["open"] = _with_face(behavior.get("open") or _ignore, topics)
    if behavior.get("drain") is not None:
        options["drain"] = _with_face(behavior["drain"], topics)
        options["open"] = _drain_after_open(options["open"], options["drain"])
    message = behavior.get("message")
    if message is not None:
        options["message"] = _with_face(message, topics, _as_opcode)
    close = behavior.get("close")
    if close is not None:
        options["close"] = _with_face(close, topics, _as_close)
    for role in ("ping", "pong"):
        if behavior.get(role) is not None:
            options["open"] = _with_ping_pong(
                options.get("open"), role, _with_face(behavior[role], topics)
            )
    return options


class SocketContext:
    """What an `upgrade` behavior passes back to `res.upgrade`: whether, and with what data,
    the connection is accepted."""

    __slots__ = ("accepted", "user_data")

    def __init__(self) -> None:
        self.accepted = False
        self.user_data: Any = None

    def accept(self, res: AppResponse, user_data: Any) -> bool:
        """Record the acceptance (the handshake is made once the behavior returns)."""
        if res.response.ended:
            return False
        self.accepted = True
        self.user_data = user_data
        return True


def ws_route(behavior: dict[str, Any], app: App) -> Callable[[Request, Response], Any]:
    """The GET handler of a socketify.py WebSocket route: upgrade, then the callbacks."""
    from socketify.realtime.pulse.routes import ws_handler

    if not isinstance(behavior, dict):
        raise TypeError("app.ws(path, behavior): behavior must be a dict")
    subscription = behavior.get("subscription")
    if subscription is not None:
        subscription = blocking(subscription, "the ws subscription behavior")
    topics = Topics(app.hub(), app.serializer, subscription)
    upgrade = ws_handler(**ws_options(behavior, topics))
    decide = behavior.get("upgrade")
    if decide is not None and not callable(decide):
        raise TypeError("the ws behavior 'upgrade' must be callable")

    def handler(req: Request, res: Response) -> Any:
        user_data = None
        if decide is not None:
            context = SocketContext()
            face, request = AppResponse(res, req, app), AppRequest(req)
            if is_async(decide):
                runner().run(decide(face, request, context))
            else:
                decide(face, request, context)
            if not context.accepted:
                return None  # the behavior answered (or the answer is an empty 200)
            user_data = context.user_data
        token = _upgrading.set((req, user_data))
        try:
            return upgrade(req, res)
        finally:
            _upgrading.reset(token)

    return handler


def _ignore(ws: WebSocket) -> None:
    """The `open` of a behavior that has none."""


def _with_face(
    callback: Callable[..., Any],
    topics: Topics,
    convert: Callable[..., tuple[Any, ...]] = lambda *rest: rest,
) -> Callable[..., Any]:
    """`callback(ws, *convert(*rest))` called as `(channel, *rest)`; async stays async."""
    if is_async(callback):

        async def call_async(channel: Channel, *rest: Any) -> Any:
            return await callback(WebSocket.of(channel, topics), *convert(*rest))

        return call_async

    def call(channel: Channel, *rest: Any) -> Any:
        return callback(WebSocket.of(channel, topics), *convert(*rest))

    return call


def _drain_after_open(
    open: Callable[..., Any], drain: Callable[..., Any]
) -> Callable[[Channel], Any]:
    """An `open` after which `drain` is called once what it sent has been written.

    In uWebSockets `open` runs after the handshake, so what it sends goes to the socket and
    `drain` follows once a backlog the socket did not take is gone. Here `open` runs while the
    handshake is being answered and its frames wait behind it, counted by
    `get_buffered_amount()`: an `open` that sends until that count grows (socketify.py's
    backpressure example) is owed a `drain` once they are written, or it would never be
    called again.
    """
    first = blocking(open, "the ws open callback")

    def opened(channel: Channel) -> Any:
        result = first(channel)
        if channel.pending_bytes:
            runner().run(_start(channel, _drain_when_written(channel, drain)))
        return result

    return opened


async def _start(channel: Channel, coroutine: Coroutine[Any, Any, Any]) -> None:
    """Schedule `coroutine` on the running loop and return at once; the channel keeps the
    task until it ends (the loop holds only weak references to its tasks)."""
    channel.locals[_DRAIN_KEY] = asyncio.get_running_loop().create_task(coroutine)


async def _drain_when_written(channel: Channel, drain: Callable[..., Any]) -> None:
    """Call `drain(channel)` once the frames queued during `open` are written."""
    while channel.alive and channel.pending_bytes:
        await asyncio.sleep(DRAIN_POLL)
    if channel.alive:
        result = drain(channel)
        if inspect.isawaitable(result):
            await result


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
