"""Header fields, checked and rendered once: what every answer's fields are made of.

Every name and value that reaches the wire passes `check_header_name`/`check_header_value`,
so no caller can split a response with CR or LF (HTTP/1.1) or send a field HTTP/2 refuses.
"""

from __future__ import annotations

import re
from typing import Final

from socketify.protocol.http.grammar import TOKEN

__all__ = [
    "LOWER_HEADER_NAMES",
    "HeaderField",
    "check_header_name",
    "check_header_value",
    "header_field",
]

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


def header_field(name: str, value: object) -> HeaderField:
    """The checked `HeaderField` for `name: value` (ValueError if either would split a head).

    A value that is not text is sent as its `str()`, like `check_header_value` does.

    PERF: answers repeat the same fields (a Content-Type, `Vary: Origin`, a CORS origin):
    those made lately are handed out again (they are immutable), without the checks and the
    rendering. The memory is bounded: a full one starts over.
    """
    if type(value) is str:
        text = value
        field = _FIELDS.get((name, text))
    else:
        text, field = check_header_value(value), None
    if field is None:
        lower = check_header_name(name)
        if not (text.isascii() and text.isprintable()):
            text = check_header_value(text)  # the full checks, for what the quick one doubts
        field = (lower, name, text, f"{name}: {text}\r\n")
        if len(_FIELDS) >= _FIELDS_KEPT:
            _FIELDS.clear()
        _FIELDS[name, text] = field
    return field


_FIELDS: Final[dict[tuple[str, str], HeaderField]] = {}
_FIELDS_KEPT: Final = 1024
