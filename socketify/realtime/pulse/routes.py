"""The uWebSockets-style shorthand behind `server.ws(path, open=, message=, close=, ...)`.

The callbacks get the `Channel` itself: `open(ws)`, `message(ws, data, is_binary)`,
`drain(ws)`, `close(ws, code, reason)`. Sends return a `SendStatus`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from socketify.core.coroutines import blocking
from socketify.realtime.pulse.accept import upgrade
from socketify.realtime.pulse.channel import Channel
from socketify.server.upgraded import MAX_BACKPRESSURE, check_max_backpressure

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = ["ws_handler"]


def ws_handler(
    *,
    open: Callable[[Channel], Any] | None = None,
    message: Callable[[Channel, str | bytes, bool], Any] | None = None,
    close: Callable[[Channel, int, str], Any] | None = None,
    drain: Callable[[Channel], Any] | None = None,
    max_payload_length: int = 1 << 20,
    idle_timeout: float | None = None,
    max_backpressure: int = MAX_BACKPRESSURE,
    close_on_backpressure_limit: bool = True,
    compression: bool = False,
    subprotocols: tuple[str, ...] = (),
    origins: Any = None,
) -> Callable[[Request, Response], None]:
    """A GET handler that upgrades and wires the callbacks to the channel.

    The limits are `pulse.upgrade`'s: `idle_timeout` pings a silent peer, then closes it with
    1001; `max_backpressure` (default 1 MiB; `pulse.UNBOUNDED` for none) bounds what waits
    for a slow reader, and past it the channel closes with 1008 (`close` sees 1008) or, with
    `close_on_backpressure_limit=False`, sends are dropped until `drain`. uWebSockets' names
    and semantics, with a roomier bound that closes instead of a 64 KiB one that drops
    silently; see `pulse.upgrade` for why.
    """
    check_max_backpressure(max_backpressure)  # a bad value fails at registration
    # An `async def` callback becomes a plain function that runs it on the worker's loop.
    if open is not None:
        open = blocking(open, "the WebSocket open callback")
    if message is not None:
        message = blocking(message, "the WebSocket message callback")
    if close is not None:
        close = blocking(close, "the WebSocket close callback")
    if drain is not None:
        drain = blocking(drain, "the WebSocket drain callback")

    def handler(req: Request, res: Response) -> None:
        ch = upgrade(
            req,
            res,
            subprotocols,
            max_payload_length,
            compression,
            origins,
            idle_timeout=idle_timeout,
            max_backpressure=max_backpressure,
            close_on_backpressure_limit=close_on_backpressure_limit,
        )
        if ch is None:
            return
        if message is not None:
            ch.on_text(lambda c, text: message(c, text, False))
            ch.on_binary(lambda c, data: message(c, data, True))
        if close is not None:
            ch.on_close(close)
        ch.on_drain = drain
        if open is not None:
            open(ch)

    return handler
