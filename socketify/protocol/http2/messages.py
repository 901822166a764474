"""HTTP semantics in HTTP/2 header lists: a request's head in, a response's fields out.

A request arrives as pseudo-header fields (`:method`, `:scheme`, `:authority`, `:path`) and
regular fields, which h2 has already checked (lower-case names, no connection-specific
fields, the pseudo-fields present and first). `request_head` turns them into the same
`RequestHead` an HTTP/1.1 request line and header section make, so everything above the wire
stays protocol-neutral. `response_headers` does the reverse for an answer's `HeaderField`s:
fields that only mean something to one HTTP/1.1 hop are dropped, Date and Server are added as
HTTP/1.1 adds them, and the length is stated when known.
"""

from __future__ import annotations

from collections.abc import Iterable

from socketify.protocol.http11.events import RequestHead
from socketify.protocol.http11.serializer import SERVER_NAME, DateLines, HeaderField
from socketify.protocol.http11.status import NO_BODY_STATUSES

__all__ = ["HOP_BY_HOP", "BadRequest", "request_head", "response_headers"]

VERSION = "HTTP/2.0"
# Connection-specific fields: HTTP/2 forbids them, the framing is the frames' own.
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection"}
)
_DATE = DateLines()
_SERVER = (b"server", SERVER_NAME.encode("latin-1"))
_STATUS = {code: (b":status", str(code).encode()) for code in range(100, 600)}


class BadRequest(Exception):
    """A request h2 let through but that HTTP cannot mean; the stream is reset."""


def request_head(fields: Iterable[tuple[bytes, bytes]]) -> RequestHead:
    """The `RequestHead` of a request's header list (names lower-case, pseudo-fields first)."""
    method = path = authority = ""
    headers: list[tuple[str, str]] = []
    cookies: list[str] = []
    has_host = False
    content_length: int | None = None
    expect_continue = False
    for raw_name, raw_value in fields:
        name = raw_name.decode("latin-1")
        value = raw_value.decode("latin-1")
        if name[0] == ":":
            if name == ":method":
                method = value
            elif name == ":path":
                path = value
            elif name == ":authority":
                authority = value
            continue
        if name == "cookie":
            # Clients may split Cookie into one field per pair; HTTP/1.1 code expects one
            # field joined with "; " (not the ", " other repeated fields get).
            cookies.append(value)
            continue
        if name == "host":
            has_host = True
        elif name == "content-length":
            if not (value.isascii() and value.isdigit()):
                raise BadRequest(f"invalid content-length {value!r}")
            content_length = int(value)
        elif name == "expect" and value.lower() == "100-continue":
            expect_continue = True
        headers.append((name, value))
    if cookies:
        headers.append(("cookie", "; ".join(cookies)))
    if authority and not has_host:
        headers.insert(0, ("host", authority))
    if method == "CONNECT":
        raise BadRequest("CONNECT is not served")
    if not path.startswith("/") and path != "*":
        raise BadRequest(f"invalid :path {path!r}")
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
        out.append((b"date", _DATE.get_date().encode("latin-1")))
    if not has_server:
        out.append(_SERVER)
    if length is not None and status not in NO_BODY_STATUSES:
        out.append((b"content-length", str(length).encode()))
    return out
