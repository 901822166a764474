"""socketify.py's `app.ws(path, behavior)`: a behavior dict as a Socketify Pulse route.

A behavior dict (`open`, `message`, `close`, `drain`, `ping`, `pong`, `upgrade`,
`subscription`, `compression`, `max_payload_length`, `idle_timeout`, `max_backpressure`,
`close_on_backpressure_limit`) becomes a Pulse route
(`socketify.realtime.pulse.routes.ws_handler`) whose callbacks get the connection's
`WebSocket` face as socketify.py passes it: `message(ws, message, opcode)` with `str` for a
text message and `bytes` for a binary one, `close(ws, code, message_bytes)`.

An `upgrade(res, req, socket_context)` behavior decides whether to accept the upgrade, sync
or `async def`: it calls `res.upgrade(key, protocol, extensions, socket_context,
user_data)` to accept, or answers the request itself to refuse. The handshake is made once
it returns, in the request's greenlet, from the request's own headers; `ws.get_user_data()`
returns the `user_data` it gave.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from socketify.core.coroutines import blocking, is_async, runner
from socketify.socketify_py.errors import unsupported
from socketify.socketify_py.response import AppResponse
from socketify.socketify_py.websocket import UPGRADING, CompressOptions, OpCode, Topics, WebSocket

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response
    from socketify.realtime.pulse.channel import Channel
    from socketify.socketify_py.app import App

__all__ = ["SocketContext", "ws_options", "ws_route"]

DRAIN_POLL = 0.005  # seconds between looks at what `open` left to write
_DRAIN_KEY = "socketify_py.drain_after_open"

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
    if topics.subscription is not None:
        # uWebSockets reports the topics a closing connection leaves; the Hub removes it
        # from them after the close callbacks.
        options["close"] = _telling_subscriptions(options.get("close"), topics)
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
    topics = Topics(app.hub(), app.serializer, subscription, app.faces.websocket)
    upgrade = ws_handler(**ws_options(behavior, topics))
    decide = behavior.get("upgrade")
    if decide is not None and not callable(decide):
        raise TypeError("the ws behavior 'upgrade' must be callable")

    def handler(req: Request, res: Response) -> Any:
        user_data = None
        if decide is not None:
            context = SocketContext()
            face, request = app.faces.response(res, req, app), app.faces.request(req)
            if is_async(decide):
                runner().run(decide(face, request, context))
            else:
                decide(face, request, context)
            if not context.accepted:
                return None  # the behavior answered (or the answer is an empty 200)
            user_data = context.user_data
        token = UPGRADING.set((req, user_data))
        try:
            return upgrade(req, res)
        finally:
            UPGRADING.reset(token)

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
            return await callback(topics.face.of(channel, topics), *convert(*rest))

        return call_async

    def call(channel: Channel, *rest: Any) -> Any:
        return callback(topics.face.of(channel, topics), *convert(*rest))

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


def _telling_subscriptions(close: Callable[..., Any] | None, topics: Topics) -> Callable[..., Any]:
    """A `close` that calls the `subscription` behavior for each topic left, then `close`."""
    then = blocking(close, "the ws close callback") if close is not None else None

    def closed(channel: Channel, code: int, reason: str) -> Any:
        topics.face.of(channel, topics).tell_closing()
        return then(channel, code, reason) if then is not None else None

    return closed


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
