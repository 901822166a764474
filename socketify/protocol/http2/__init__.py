"""HTTP/2, sans-IO, for the server side: bytes in, events out; answers in, bytes out.

Our own frame and HPACK codec: imports only the standard library and the protocol-neutral
parts of `socketify.protocol.http11`; nothing here knows about sockets or greenlets.
"""

from __future__ import annotations

from socketify.protocol.http2.connection import (
    CANCEL,
    ENHANCE_YOUR_CALM,
    INTERNAL_ERROR,
    NO_ERROR,
    PREFACE,
    PROTOCOL_ERROR,
    REFUSED_STREAM,
    Http2ServerConnection,
    StreamClosed,
)
from socketify.protocol.http2.events import (
    BodyData,
    ConnectionTerminated,
    Event,
    PeerGoingAway,
    RequestOpened,
    StreamEnded,
    StreamReset,
    WindowOpened,
)
from socketify.protocol.http2.limits import FLOOD_BUDGETS, Http2Limits

__all__ = [
    "CANCEL",
    "ENHANCE_YOUR_CALM",
    "FLOOD_BUDGETS",
    "INTERNAL_ERROR",
    "NO_ERROR",
    "PREFACE",
    "PROTOCOL_ERROR",
    "REFUSED_STREAM",
    "BodyData",
    "ConnectionTerminated",
    "Event",
    "Http2Limits",
    "Http2ServerConnection",
    "PeerGoingAway",
    "RequestOpened",
    "StreamClosed",
    "StreamEnded",
    "StreamReset",
    "WindowOpened",
]
