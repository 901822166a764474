"""HTTP/1.1 response heads, sans-IO: heads of refusals, chunks.

The fields, their checks and the Date clock are HTTP's, shared with HTTP/2
(`socketify.protocol.http`); they are imported here for the HTTP/1.1 modules and callers.
"""

from __future__ import annotations

from collections.abc import Iterable

from socketify.protocol.http.dates import DATE_CLOCK, SERVER_NAME, DateLines, http_date
from socketify.protocol.http.fields import (
    LOWER_HEADER_NAMES,
    HeaderField,
    check_header_name,
    check_header_value,
    header_field,
)
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
