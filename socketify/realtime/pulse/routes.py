"""The uWebSockets-style shorthand behind `server.ws(path, open=, message=, close=, ...)`.

The callbacks get the `Channel` itself (DESIGN §4b): `open(ws)`, `message(ws, data,
is_binary)`, `drain(ws)`, `close(ws, code, reason)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from socketify.realtime.pulse import upgrade
from socketify.realtime.pulse.channel import Channel

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
    max_backpressure: int | None = None,
    compression: bool = False,
    subprotocols: tuple[str, ...] = (),
    origins: Any = None,
) -> Callable[[Request, Response], None]:
    """A GET handler that upgrades and wires the callbacks to the channel."""

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
