"""HTTP semantics in HTTP/2 header lists: a request's head in, a response's fields out.

A request arrives as pseudo-header fields (`:method`, `:scheme`, `:authority`, `:path`) and
regular fields. `request_head` checks them as RFC 9113 §8.2 and §8.3 require (lower-case
names, no connection-specific fields, each pseudo-field once and first) and turns them into
the same `RequestHead` an HTTP/1.1 request line and header section make, so everything above
the wire stays protocol-neutral; a malformed request is a `BadRequest`, which resets only its
own stream. `trailer_fields` checks a request's trailers as strictly (a pseudo-header or a
connection-specific field resets the stream) and drops the fields no trailer may carry, as
HTTP/1.1 does (`socketify.protocol.http.trailers`). `response_headers` does the reverse
for an answer's `HeaderField`s: fields that only mean something to one HTTP/1.1 hop are
dropped, Date and Server are added as HTTP/1.1 adds them, and the length is stated when known.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from socketify.protocol.http.dates import DATE_CLOCK, SERVER_NAME
from socketify.protocol.http.fields import HeaderField
from socketify.protocol.http.heads import RequestHead
from socketify.protocol.http.status import NO_BODY_STATUSES
from socketify.protocol.http.trailers import is_forbidden_trailer
from socketify.protocol.http11.target import is_authority

__all__ = ["HOP_BY_HOP", "BadRequest", "request_head", "response_headers", "trailer_fields"]

VERSION = "HTTP/2.0"
# Connection-specific fields: HTTP/2 forbids them, the framing is the frames' own.
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection"}
)
_SERVER = (b"server", SERVER_NAME.encode("latin-1"))
# RFC 9113 §8.2.1: names hold no control, space, upper-case, colon or non-ASCII bytes (a
# pseudo-header's leading colon is looked at first); values no NUL, CR or LF, and no
# whitespace at either end. Values with other control bytes (HTAB aside) are refused too,
# as HTTP/1.1 refuses them: a request passed on to an HTTP/1.1 hop must mean the same there.
_bad_name = re.compile(rb"[\x00-\x20A-Z:\x7f-\xff]").search
_bad_value = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]|\A[ \t]|[ \t]\Z").search
_STATUS = {code: (b":status", str(code).encode()) for code in range(100, 600)}


class BadRequest(Exception):
    """A malformed request: the stream is reset with PROTOCOL_ERROR, the connection lives on."""


def request_head(fields: Iterable[tuple[bytes, bytes]]) -> RequestHead:
    """The `RequestHead` of a request's header list; BadRequest when it is malformed."""
    # PERF: one pass checks and converts each field.
    method = scheme = path = authority = None
    headers: list[tuple[str, str]] = []
    cookies: list[str] = []
    has_host = regular = False
    content_length: int | None = None
    expect_continue = False
    for raw_name, raw_value in fields:
        if _bad_value(raw_value):
            raise BadRequest(f"invalid value in {raw_name!r}")
        name = raw_name.decode("latin-1")
        value = raw_value.decode("latin-1")
        if name[:1] == ":":
            if regular:
                raise BadRequest(f"pseudo-header {name} after regular fields")
            if name == ":method" and method is None:
                method = value
            elif name == ":path" and path is None:
                path = value
            elif name == ":scheme" and scheme is None:
                scheme = value
            elif name == ":authority" and authority is None:
                authority = value
            else:
                raise BadRequest(f"unknown or repeated pseudo-header {name}")
            continue
        regular = True
        if raw_name == b"content-length":
            length = _content_length(value)
            if content_length is not None and length != content_length:
                raise BadRequest("conflicting content-length fields")
            content_length = length
            headers.append(("content-length", value))
            continue
        if _bad_name(raw_name) or not raw_name:
            raise BadRequest(f"invalid field name {raw_name!r}")
        if name == "cookie":
            # Clients may split Cookie into one field per pair; HTTP/1.1 code expects one
            # field joined with "; " (not the ", " other repeated fields get).
            cookies.append(value)
            continue
        if name == "host":
            has_host = True
            if not is_authority(value):
                raise BadRequest("host is not a valid authority")
        elif name in HOP_BY_HOP:
            raise BadRequest(f"connection-specific field {name}")
        elif name == "te" and value != "trailers":
            raise BadRequest(f"te: {value}")
        elif name == "expect" and value.lower() == "100-continue":
            expect_continue = True
        headers.append((name, value))
    if method == "CONNECT":
        raise BadRequest("CONNECT is not served")
    if not method or not scheme or path is None:
        raise BadRequest("a request needs :method, :scheme and :path")
    if authority is not None and not is_authority(authority):
        raise BadRequest(":authority is not a valid authority")
    if not path.startswith("/") and path != "*":
        raise BadRequest(f"invalid :path {path!r}")
    if cookies:
        headers.append(("cookie", "; ".join(cookies)))
    if authority and not has_host:
        headers.insert(0, ("host", authority))
    target = path
    path, _, query = target.partition("?")
    return RequestHead(
        method,
        target,
        path,
        query,
        VERSION,
        headers,
        content_length=content_length,
        keep_alive=True,
        expect_continue=expect_continue,
    )


def trailer_fields(fields: Iterable[tuple[bytes, bytes]]) -> tuple[tuple[str, str], ...]:
    """The trailer fields of a request, checked as its header fields are; no pseudo-headers.

    Fields no trailer may carry (`is_forbidden_trailer`) are dropped, not refused.
    """
    trailers = []
    for raw_name, raw_value in fields:
        if _bad_name(raw_name) or not raw_name or _bad_value(raw_value):
            raise BadRequest(f"invalid trailer field {raw_name!r}")
        name = raw_name.decode("latin-1")
        if name in HOP_BY_HOP or name == "te":
            raise BadRequest(f"connection-specific trailer field {name}")
        if not is_forbidden_trailer(name):
            trailers.append((name, raw_value.decode("latin-1")))
    return tuple(trailers)


def _content_length(value: str) -> int:
    if not (value.isascii() and value.isdigit()):
        raise BadRequest(f"invalid content-length {value!r}")
    return int(value)


def response_headers(
    status: int, fields: Iterable[HeaderField], length: int | None
) -> list[tuple[bytes, bytes]]:
    """The header list of an answer: `:status`, the fields, Date, Server, content-length.

    `length` is the body's size, or None when unknown (a stream); 1xx, 204 and 304 answers
    never state one. A HEAD answer states the GET answer's length, as HTTP/1.1 does.
    """
    out = [_STATUS.get(status) or (b":status", str(status).encode())]
    has_date = has_server = False
    for lower, _name, value, _line in fields:
        if lower in HOP_BY_HOP:
            continue
        if lower == "date":
            has_date = True
        elif lower == "server":
            has_server = True
        out.append((lower.encode("latin-1"), value.encode("latin-1")))
    if not has_date:
        out.append((b"date", DATE_CLOCK.get_date().encode("latin-1")))
    if not has_server:
        out.append(_SERVER)
    if length is not None and status not in NO_BODY_STATUSES:
        out.append((b"content-length", str(length).encode()))
    return out
