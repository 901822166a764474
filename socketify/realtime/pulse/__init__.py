"""Pulse: WebSocket channels and rooms that span workers.

    ch = pulse.upgrade(req, res, subprotocols=["chat"])
    if ch is None:
        return                                  # 400/426/403 already answered
    ch.on_text(lambda ch, text: ch.send_text(text))
    hub.join("lobby", ch); hub.broadcast_text("lobby", "hi", exclude=ch)

`upgrade` (`accept`) checks the handshake and makes the `Channel` (`channel`); `Hub` (`hub`)
keeps rooms of channels whose broadcasts reach every worker. `pulse.easy` (JSON events) and
`pulse.media` (the `PM` binary media frames) build on these.

Sends return a `SendStatus` (`SENT`, `BACKPRESSURE`, `DROPPED`; truthy unless dropped). What
waits for a slow peer is bounded by `max_backpressure` (`MAX_BACKPRESSURE`, 1 MiB, unless
given; `UNBOUNDED` asks for no bound); see `upgrade`.
"""

from __future__ import annotations

from socketify.realtime.pulse import easy, media
from socketify.realtime.pulse.accept import upgrade
from socketify.realtime.pulse.channel import Channel
from socketify.realtime.pulse.hub import Hub
from socketify.server.upgraded import MAX_BACKPRESSURE, UNBOUNDED, SendStatus

__all__ = [
    "MAX_BACKPRESSURE",
    "UNBOUNDED",
    "Channel",
    "Hub",
    "SendStatus",
    "easy",
    "media",
    "upgrade",
]
