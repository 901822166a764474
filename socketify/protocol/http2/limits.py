"""The bounds one HTTP/2 connection keeps a client within, and the per-second counters.

An HTTP/2 client can make a server work without sending requests: reset every stream it opens
(rapid reset), or send SETTINGS or PING frames that must each be answered. Each such frame is
counted in a one-second window; a client over its cap is told GOAWAY ENHANCE_YOUR_CALM and
dropped, as nginx and Go's server do. The other bounds (streams, header sizes, frame size) are
what the connection advertises in its SETTINGS and enforces.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["Http2Limits", "RateCounter"]


@dataclass(frozen=True, slots=True)
class Http2Limits:
    """Per-connection bounds; `ServerOptions` supplies them (see its `http2_*` fields)."""

    max_concurrent_streams: int = 100  # more open at once are refused with REFUSED_STREAM
    max_header_list_size: int = 16384  # decoded header section, as HPACK counts it
    max_frame_size: int = 16384  # larger inbound frames are a FRAME_SIZE_ERROR
    max_resets_per_second: int = 100  # streams the client resets
    max_settings_per_second: int = 50
    max_pings_per_second: int = 50
    stream_window: int = 1 << 18  # unread body bytes a stream may buffer

    @property
    def max_header_block(self) -> int:
        """Bytes of one compressed header block (HEADERS plus CONTINUATIONs) we buffer.

        HPACK rarely makes a block larger than its decoded list; twice the list, plus one
        frame for a client that splits badly, is room for any honest one.
        """
        return 2 * self.max_header_list_size + self.max_frame_size


class RateCounter:
    """Counts events in fixed one-second windows; `hit()` is False once over `limit`."""

    __slots__ = ("count", "limit", "window_end")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0
        self.window_end = 0.0

    def hit(self, now: float | None = None) -> bool:
        """Count one event; False when this second has seen more than `limit`."""
        if now is None:
            now = time.monotonic()
        if now >= self.window_end:
            self.window_end = now + 1.0
            self.count = 0
        self.count += 1
        return self.count <= self.limit
