"""Pulse: WebSocket channels and cross-worker rooms (SPEC §1.13, DESIGN §4).

    ch = pulse.upgrade(req, res, subprotocols=["chat"])
    if ch is None:
        return                                  # 400/426/403 already answered
    ch.on_text(lambda ch, text: ch.send_text(text))
    hub.join("lobby", ch); hub.broadcast_text("lobby", "hi", exclude=ch)

`pulse.easy` (JSON events) and `pulse.media` (the `PM` binary media frames) build on these.

`upgrade` checks the handshake with the sans-IO `protocol.websocket.server_handshake`, sets
the 101 and hands the socket to the channel once the handler chain has returned.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from socketify.protocol.websocket import Connection as Protocol
from socketify.protocol.websocket import (
    DeflateOptions,
    UpgradeRefused,
    server_handshake,
)
from socketify.protocol.websocket.handshake import OriginPolicy
from socketify.realtime.pulse.channel import Channel
from socketify.realtime.pulse.hub import Hub

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = ["Channel", "Hub", "easy", "media", "upgrade"]


def upgrade(
    req: Request,
    res: Response,
    subprotocols: Collection[str] = (),
    max_message_bytes: int = 1 << 20,
    compression: bool | DeflateOptions = False,
    origins: OriginPolicy | None = None,
    *,
    idle_timeout: float | None = None,
    max_backpressure: int | None = None,
) -> Channel | None:
    """Accept a WebSocket upgrade: a `Channel`, or None after answering 400/426/403."""
    deflate = compression if isinstance(compression, DeflateOptions) else None
    if compression is True:
        deflate = DeflateOptions()
    outcome = server_handshake(
        req.method,
        req.http_version,
        req.headers.items(),
        subprotocols=subprotocols,
        origins=origins,
        deflate=deflate,
    )
    if isinstance(outcome, UpgradeRefused):
        res.status(outcome.status)
        for name, value in outcome.headers:
            res.set_header(name, value)
        res.send(f"{outcome.detail}\n", "text/plain; charset=utf-8")
        return None
    proto = Protocol(max_message_bytes=max_message_bytes, deflate=outcome.deflate)
    ch = Channel(
        proto,
        outcome.subprotocol,
        idle_timeout=idle_timeout,
        max_backpressure=max_backpressure,
    )
    res.status(101)
    for name, value in outcome.headers:
        res.set_header(name, value)
    res.upgrade = ch._run
    return ch


# Last: both import `upgrade` and `Hub` from this package.
from socketify.realtime.pulse import easy, media  # noqa: E402
