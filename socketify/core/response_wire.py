"""How a finished `Response` becomes bytes: its head, and head plus body when buffered.

Theory of operation. `head_bytes` writes the status line, Date and Server (or the handler's
own), the handler's headers, Set-Cookie lines, Content-Type, the framing header
(Content-Length or chunked) and Connection, in that order (SPEC §1.2). `buffered_bytes` adds
the body unless the answer has none on the wire (HEAD, 1xx, 204, 304).

PERF: most answers are plain: a status, maybe a Content-Type, a buffered body, and no other
header or cookie. Their head depends only on (status, Content-Type, body length, keep-alive)
and the current Date second, so `_PlainHeads` keeps the heads built during this second and
a repeated answer (a health check, an API polled or pipelined) costs one dict lookup. An
answer that adds a few headers or cookies of its own (rate-limit headers, a session cookie)
reuses the same cached parts around its own lines, which `Response` checked when they were
set; only an answer that replaces Date, Server or Connection, or is not buffered, is built
line by line.
"""

from __future__ import annotations

from time import time as _time
from typing import TYPE_CHECKING

from socketify.protocol.http11.serializer import DateLines, http_date
from socketify.protocol.http11.status import NO_BODY_STATUSES, STATUS_LINES, status_line

if TYPE_CHECKING:
    from socketify.core.response import Response

__all__ = ["buffered_bytes", "head_bytes"]

_DATE = DateLines()
_PLAIN_HEADS_MAX = 256  # distinct plain heads kept per second; more just rebuild


class _PlainHeads:
    """Heads of plain answers built during the current Date second, and that second's lines.

    Each head is kept whole and in two parts, split where the handler's own header lines go:
    the status, Date and Server lines before, Content-Type and the framing lines after.
    """

    __slots__ = ("heads", "lines", "until")

    def __init__(self) -> None:
        self.heads: dict[tuple[int, str | None, int, bool], tuple[bytes, bytes, bytes]] = {}
        self.lines = ""  # the Date and Server lines every stored head was built with
        self.until = 0.0  # when they go stale


_PLAIN = _PlainHeads()


def buffered_bytes(res: Response, keep_alive: bool) -> bytes:
    """Head plus body for a buffered answer; the head alone for the other kinds."""
    if res._chunks:
        res.replace_body(res.body)
    if (
        res._own is not None
        or res.upgrade is not None
        or res.stream_iter is not None
        or res.file_path is not None
    ):
        head = head_bytes(res, keep_alive)
        if res.upgrade or res.stream_iter or res.file_path:
            return head
    else:
        # PERF: a buffered answer with a few headers or cookies of its own (rate-limit
        # headers, a session cookie) reuses the cached parts around its own lines.
        plain = _PLAIN
        heads = plain.heads
        if _time() >= plain.until:
            plain.lines = _DATE.get()
            plain.until = _DATE.until
            heads.clear()
        keep_alive = keep_alive and not res.close_connection
        key = (res._status, res._content_type, len(res._body), keep_alive)
        parts = heads.get(key)
        if parts is None:
            code = res._status or 200
            start = ((STATUS_LINES.get(code) or status_line(code)) + plain.lines).encode("latin-1")
            tail = _tail(res, keep_alive, code)
            parts = (start + tail, start, tail)
            if len(heads) >= _PLAIN_HEADS_MAX:
                heads.clear()
            heads[key] = parts
        headers = res._headers
        if res._cookies is not None:
            own = _own_lines(res)
        elif headers is not None:
            # PERF: header lines only (a request id, CORS): joined here, a call less.
            own = ""
            for header in headers:
                own += header[3]
        else:
            head = parts[0]
            if res._head_only or res._status in NO_BODY_STATUSES:
                return head
            return head + res._body
        # PERF: one join makes the answer (concatenating would copy the head twice); "latin1"
        # is the spelling the encoder finds without normalising it.
        if res._head_only or res._status in NO_BODY_STATUSES:
            return b"".join((parts[1], own.encode("latin1"), parts[2]))
        return b"".join((parts[1], own.encode("latin1"), parts[2], res._body))
    if res._head_only or res._status in NO_BODY_STATUSES:
        return head
    return head + res._body


def head_bytes(res: Response, keep_alive: bool, date_server: str | None = None) -> bytes:
    """The status line and header block of `res`, ending with the blank line."""
    code = res._status or 200
    own = res._own
    if own is not None and ("date" in own or "server" in own):
        date = own.get("date") or http_date()
        date_server = f"Date: {date}\r\nServer: {own.get('server', 'socketify')}\r\n"
    elif date_server is None:
        date_server = _DATE.get()
    line = STATUS_LINES.get(code) or status_line(code)
    return (line + date_server + _own_lines(res)).encode("latin-1") + _tail(res, keep_alive, code)


def _own_lines(res: Response) -> str:
    """The handler's header lines, then its Set-Cookie lines."""
    # PERF: for the few lines an answer has, += beats building a list to join (half the time).
    extra = ""
    if res._headers:
        for header in res._headers:
            extra += header[3]
    if res._cookies:
        for line in res._cookies:
            extra += f"Set-Cookie: {line}\r\n"
    return extra


def _tail(res: Response, keep_alive: bool, code: int) -> bytes:
    """Content-Type, the framing header and Connection, then the blank line."""
    extra = ""
    if res._content_type is not None:
        extra = f"Content-Type: {res._content_type}\r\n"
    own = res._own
    if res.upgrade is not None:
        connection = (own or {}).get("connection", "close")
    else:
        if code in NO_BODY_STATUSES:
            pass  # RFC 9110: no content, so no Content-Length either
        elif res.stream_iter is not None:
            if res._http10:
                keep_alive = False  # no chunking: the close ends the body
            else:
                extra += "Transfer-Encoding: chunked\r\n"
        elif res.file_path is not None:
            extra += f"Content-Length: {res.file_length}\r\n"
        else:
            extra += f"Content-Length: {len(res.body)}\r\n"
        connection = "keep-alive" if keep_alive and not res.close_connection else "close"
    return f"{extra}Connection: {connection}\r\n\r\n".encode("latin-1")
