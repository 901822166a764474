"""`upgrade`: accept a WebSocket upgrade request and make its `Channel`.

The handshake is checked by the sans-IO `protocol.websocket.server_handshake`; a refusal is
answered here (400, 426 or 403) and gives None. An accepted request gets its 101 and headers
on `res`, and `res.upgrade` is set to the channel's `serve`, which the connection layer runs
once the handler chain has returned and the head is out. Frames sent before that wait.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from socketify.protocol.websocket import Connection as Protocol
from socketify.protocol.websocket import DeflateOptions, UpgradeRefused, server_handshake
from socketify.protocol.websocket.handshake import OriginPolicy
from socketify.realtime.pulse.channel import Channel
from socketify.server.upgraded import MAX_BACKPRESSURE

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = ["upgrade"]


def upgrade(
    req: Request,
    res: Response,
    subprotocols: Collection[str] = (),
    max_message_bytes: int = 1 << 20,
    compression: bool | DeflateOptions = False,
    origins: OriginPolicy | None = None,
    *,
    idle_timeout: float | None = None,
    max_backpressure: int = MAX_BACKPRESSURE,
    close_on_backpressure_limit: bool = True,
) -> Channel | None:
    """Accept a WebSocket upgrade: a `Channel`, or None after answering 400/426/403.

    `idle_timeout` (seconds): a peer silent that long gets a ping; silent for another
    period, it gets a close frame with 1001 (going away) and is dropped; `on_close` sees 1001.

    `max_backpressure` (bytes, default `MAX_BACKPRESSURE` = 1 MiB) bounds what may wait for a
    peer that reads slower than we send; frames sent in the handler, before the 101 is out,
    count too. A send that finds more than that waiting is not sent and returns DROPPED, and
    the channel closes with 1008 (policy violation: the peer does not read): the waiting
    messages are discarded, the close frame goes right behind the one being written, and a
    peer that never reads again is dropped after the close wait (5 s); `on_close` reports
    1008. So a stalled peer costs at most the limit plus the message that crossed it.
    `close_on_backpressure_limit=False` keeps the channel open and only drops (uWebSockets'
    default policy; `on_drain` says when to resume), for streams where a lost message is
    fine (live media). `UNBOUNDED` asks for no bound (the app then owns the memory).

    Why these defaults: uWebSockets bounds the backlog at 64 KiB and drops silently past
    it (`closeOnBackpressureLimit` off); Node's `ws` never bounds it (it only reports
    `bufferedAmount`), which is how one stalled client grew a worker by 250 MB. A silent drop
    corrupts any protocol with history, so we close; and since closing is harsher than
    dropping, the bound is roomier than uWebSockets' so a healthy client behind a slow link
    that absorbs a burst is not cut off, while ten stalled clients still cost ~10 MiB.
    """
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
        close_on_backpressure_limit=close_on_backpressure_limit,
    )
    res.status(101)
    for name, value in outcome.headers:
        res.set_header(name, value)
    res.upgrade = ch.serve
    return ch
