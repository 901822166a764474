"""The bounds one HTTP/2 connection keeps a client within, and the counters that enforce them.

An HTTP/2 client can make a server work without sending requests. Some frames must each be
answered: SETTINGS and PING, and the streams it resets as soon as it opens them (rapid
reset). Others are only work for us and carry nothing a request needs: PRIORITY (we do not
schedule by it), WINDOW_UPDATE beyond what our own DATA frames call for, DATA frames with
no payload that do not end their stream, and frame types HTTP/2 does not define (which a
receiver must skip). A connection pouring in any of these at a few MB/s would keep its worker
busy with nothing else. Each kind is counted as its frames arrive (`FrameReader`), before
any is handled, in one-second windows against its budget (`FLOOD_BUDGETS`, `FrameBudgets`); a client
over a budget is told GOAWAY ENHANCE_YOUR_CALM and dropped, as nginx and Go's server do. The
budgets are far above what any browser or client library sends: they cap floods, not use.
Acknowledgements (SETTINGS and PING with the ACK flag) answer frames of ours and are free.

A WINDOW_UPDATE is the client's due answer to DATA we sent (one for the stream, one for the
connection), so each DATA frame we send earns the client two (`FrameBudgets.earn`) besides
its budget: a fast download is never mistaken for a flood.

The other bounds (streams, header sizes, frame size) are what the connection advertises in
its SETTINGS and enforces.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["FLOOD_BUDGETS", "FrameBudgets", "Http2Limits", "RateCounter"]

# Frame types (RFC 9113 section 6) that the budgets below look at.
DATA, PRIORITY, RST_STREAM, SETTINGS, PING, WINDOW_UPDATE = 0x0, 0x2, 0x3, 0x4, 0x6, 0x8
LAST_DEFINED_TYPE = 0x9  # CONTINUATION; a larger type is an extension or unknown
_END_STREAM = _ACK = 0x1


@dataclass(frozen=True, slots=True)
class Http2Limits:
    """Per-connection bounds; `ServerOptions` supplies some of them (see its `http2_*` fields)."""

    max_concurrent_streams: int = 100  # more open at once are refused with REFUSED_STREAM
    max_header_list_size: int = 16384  # decoded header section, as HPACK counts it
    max_frame_size: int = 16384  # larger inbound frames are a FRAME_SIZE_ERROR
    max_resets_per_second: int = 100  # streams the client resets
    max_refused_per_second: int = 100  # streams we refuse: past the limit, or malformed
    max_settings_per_second: int = 50
    max_pings_per_second: int = 50
    max_priority_per_second: int = 1000
    max_window_updates_per_second: int = 1000  # beyond the two each DATA frame we send earns
    max_empty_data_per_second: int = 100  # DATA without payload that does not end its stream
    max_unknown_frames_per_second: int = 1000  # types HTTP/2 does not define
    stream_window: int = 1 << 18  # unread body bytes a stream may buffer

    @property
    def max_header_block(self) -> int:
        """Bytes of one compressed header block (HEADERS plus CONTINUATIONs) we buffer.

        HPACK rarely makes a block larger than its decoded list; twice the list, plus one
        frame for a client that splits badly, is room for any honest one.
        """
        return 2 * self.max_header_list_size + self.max_frame_size


# What each flood is called (in the GOAWAY's debug data and the log) and the `Http2Limits`
# field that is its budget per second.
FLOOD_BUDGETS: dict[str, str] = {
    "too many streams reset": "max_resets_per_second",
    "too many streams refused": "max_refused_per_second",
    "SETTINGS flood": "max_settings_per_second",
    "PING flood": "max_pings_per_second",
    "PRIORITY flood": "max_priority_per_second",
    "WINDOW_UPDATE flood": "max_window_updates_per_second",
    "empty DATA flood": "max_empty_data_per_second",
    "unknown frame flood": "max_unknown_frames_per_second",
}

# Earned WINDOW_UPDATEs kept at most: a client that downloaded a lot may not bank a flood.
_MAX_EARNED = 1 << 16


class RateCounter:
    """Counts events in fixed one-second windows; `hit()` is False once over `limit`.

    Credits given with `earn` are spent, one an event, on events past the limit: they last
    across windows until spent.
    """

    __slots__ = ("count", "earned", "limit", "window_end")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0
        self.earned = 0
        self.window_end = 0.0

    def hit(self, now: float | None = None) -> bool:
        """Count one event; False when this second has seen more than `limit` (and no credit)."""
        if now is None:
            now = time.monotonic()
        if now >= self.window_end:
            self.window_end = now + 1.0
            self.count = 0
        self.count += 1
        if self.count <= self.limit:
            return True
        if self.earned:
            self.earned -= 1
            return True
        return False

    def earn(self, credits: int) -> None:
        """Allow `credits` more events beyond the limit (up to a bound)."""
        self.earned = min(self.earned + credits, _MAX_EARNED)


class FrameBudgets:
    """The per-second budgets of the frames that cost work but carry no request."""

    __slots__ = (
        "_empty_data",
        "_pings",
        "_priority",
        "_refused",
        "_resets",
        "_settings",
        "_unknown",
        "_window_updates",
    )

    def __init__(self, limits: Http2Limits) -> None:
        self._resets = RateCounter(limits.max_resets_per_second)
        self._refused = RateCounter(limits.max_refused_per_second)
        self._settings = RateCounter(limits.max_settings_per_second)
        self._pings = RateCounter(limits.max_pings_per_second)
        self._priority = RateCounter(limits.max_priority_per_second)
        self._window_updates = RateCounter(limits.max_window_updates_per_second)
        self._empty_data = RateCounter(limits.max_empty_data_per_second)
        self._unknown = RateCounter(limits.max_unknown_frames_per_second)

    def charge(self, kind: int, length: int, flags: int, now: float) -> str | None:
        """Count one inbound frame; the flood's name (see `FLOOD_BUDGETS`) if it is over."""
        if kind == DATA:
            if length or flags & _END_STREAM or self._empty_data.hit(now):
                return None
            return "empty DATA flood"
        if kind == RST_STREAM:
            return None if self._resets.hit(now) else "too many streams reset"
        if kind == SETTINGS:
            return None if flags & _ACK or self._settings.hit(now) else "SETTINGS flood"
        if kind == PING:
            return None if flags & _ACK or self._pings.hit(now) else "PING flood"
        if kind == PRIORITY:
            return None if self._priority.hit(now) else "PRIORITY flood"
        if kind == WINDOW_UPDATE:
            return None if self._window_updates.hit(now) else "WINDOW_UPDATE flood"
        if kind > LAST_DEFINED_TYPE:
            return None if self._unknown.hit(now) else "unknown frame flood"
        return None

    def refuse(self) -> str | None:
        """Count one stream we refused as it opened; the flood's name if it is over.

        A client that keeps opening streams past our limit, or malformed ones, costs a
        header block decoded and a RST_STREAM sent for each, and is never served.
        """
        return None if self._refused.hit() else "too many streams refused"

    def earn(self, data_frames: int) -> None:
        """We sent `data_frames` DATA frames: the client may acknowledge each twice."""
        self._window_updates.earn(2 * data_frames)
