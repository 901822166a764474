"""HTTP/1.1 response heads, sans-IO: status lines, dates, field checks, chunks.

Every name and value that reaches the wire passes `check_header_name`/`check_header_value`,
so no caller can split a response with CR or LF.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable

from socketify.protocol.http11.grammar import TOKEN
from socketify.protocol.http11.status import reason, status_line

__all__ = [
    "DATE_CLOCK",
    "LOWER_HEADER_NAMES",
    "SERVER_NAME",
    "DateLines",
    "HeaderField",
    "check_header_name",
    "check_header_value",
    "encode_chunk",
    "error_response",
    "header_field",
    "http_date",
    "serialize_head",
]

SERVER_NAME = "socketify"  # the Server header of every answer that does not set its own
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(timestamp: float | None = None) -> str:
    """Format a Unix time (default: now) as an IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`."""
    t = time.gmtime(time.time() if timestamp is None else timestamp)
    return (
        f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {_MONTHS[t.tm_mon - 1]} {t.tm_year:04d} "
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} GMT"
    )


class DateLines:
    """The `Date:` and `Server:` lines of a response head, formatted at most once a second."""

    __slots__ = ("date", "lines", "until")

    def __init__(self) -> None:
        self.until = 0.0
        self.lines = ""
        self.date = ""  # the Date value alone, for protocols that send fields, not lines

    def get(self) -> str:
        """Return both lines, CRLF-terminated, for the current second."""
        now = time.time()
        if now >= self.until:  # PERF: one float compare per response, no int() call
            self._start_second(now)
        return self.lines

    def get_date(self) -> str:
        """Return the Date value for the current second."""
        now = time.time()
        if now >= self.until:
            self._start_second(now)
        return self.date

    def _start_second(self, now: float) -> None:
        self.date = http_date(now)
        self.lines = f"Date: {self.date}\r\nServer: {SERVER_NAME}\r\n"
        self.until = int(now) + 1


# The one clock of the process: every protocol's answers read their Date from it.
DATE_CLOCK = DateLines()


# PERF: common names skip the token regex and the lower() call (callers may look them up
# directly before calling `check_header_name`).
LOWER_HEADER_NAMES = {
    name: name.lower()
    for name in (
        "Content-Type", "content-type", "Cache-Control", "Location", "Vary", "ETag",
        "Last-Modified", "Content-Encoding", "Content-Disposition", "Content-Range",
        "Accept-Ranges", "Access-Control-Allow-Origin", "X-Request-Id", "Set-Cookie",
        "Connection", "Date", "Server", "Content-Length", "Transfer-Encoding",
        "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After",
    )
}  # fmt: skip


# RFC 9110 §5.5: a field value is visible characters, SP, HTAB and obs-text.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def check_header_name(name: str) -> str:
    """Return `name` lower-cased; ValueError unless it is an RFC 9110 token."""
    lower = LOWER_HEADER_NAMES.get(name)
    if lower is None:
        if not isinstance(name, str) or not TOKEN.fullmatch(name):
            raise ValueError(f"invalid header name {name!r}")
        lower = name.lower()
    return lower


def check_header_value(value: object) -> str:
    """Return `value` as text; ValueError on a control character other than HTAB (CR and LF
    would split the response; the others are read differently by each client and proxy) or
    on text that is not latin-1."""
    text = value if type(value) is str else str(value)
    control = _CONTROL.search(text)
    if control is not None:
        raise ValueError(
            f"header values must not contain control characters ({control[0]!r} found)"
        )
    if not text.isascii():
        try:
            text.encode("latin-1")
        except UnicodeEncodeError:
            raise ValueError("header values must be latin-1; percent-encode the rest") from None
    return text


# One response header field, checked and rendered once: (lower-case name, name as given,
# value, `Name: value\r\n`). `ServerConnection` writes the last part as it is.
HeaderField = tuple[str, str, str, str]


def header_field(name: str, value: str) -> HeaderField:
    """The checked `HeaderField` for `name: value` (ValueError if either would split a head).

    PERF: answers repeat the same fields (a Content-Type, `Vary: Origin`, a CORS origin):
    those made lately are handed out again (they are immutable), without the checks and the
    rendering. The memory is bounded: a full one starts over.
    """
    key = (name, value)
    field = _FIELDS.get(key) if type(value) is str else None
    if field is None:
        lower = check_header_name(name)
        if type(value) is not str or not (value.isascii() and value.isprintable()):
            value = check_header_value(value)  # the full checks, for what the quick one doubts
        field = (lower, name, value, f"{name}: {value}\r\n")
        if len(_FIELDS) >= _FIELDS_KEPT:
            _FIELDS.clear()
        _FIELDS[key] = field
    return field


_FIELDS: dict[tuple[str, str], HeaderField] = {}
_FIELDS_KEPT = 1024


def serialize_head(status: int, headers: Iterable[tuple[str, str]]) -> bytes:
    """Build a response head: status line, Date, Server, the given headers, blank line.

    Framing headers (Content-Length, Transfer-Encoding, Connection) are the caller's to
    include; every name and value is checked against response splitting.
    """
    lines = [status_line(status), DATE_CLOCK.get()]
    for name, value in headers:
        check_header_name(name)
        lines.append(f"{name}: {check_header_value(value)}\r\n")
    lines.append("\r\n")
    return "".join(lines).encode("latin-1")


def error_response(status: int, detail: str = "") -> bytes:
    """A complete `Connection: close` answer for input we refused: `<Reason>: <detail>`."""
    phrase = reason(status)
    body = (f"{phrase}: {detail}\n" if detail else f"{phrase}\n").encode()
    head = serialize_head(
        status,
        [
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Length", str(len(body))),
            ("Connection", "close"),
        ],
    )
    return head + body


def encode_chunk(data: bytes) -> bytes:
    """One chunk of a chunked body; empty data is skipped (it would end the body)."""
    if not data:
        return b""
    return b"%x\r\n%s\r\n" % (len(data), data)
