"""One HTTP/1.1 server connection, sans-IO: request bytes in, events out; a response in, bytes out.

Theory of operation. `ServerConnection` owns the connection's parser and the state of the
answer being sent. The owner (a socket greenlet, or `TestClient`) feeds it what it received and
pulls events:

    conn.receive_data(sock.recv(65536))       # b"" means the peer closed
    while (event := conn.next_event()) is not NEED_DATA:
        ...                                     # RequestHead, body bytes, END_OF_MESSAGE, CLOSED

A request is one `RequestHead`, its body pieces, then `END_OF_MESSAGE`; input we refuse raises
`ParseError(status, detail)` and the owner answers `conn.refuse(...)` and closes. Pipelined
requests wait in the parser's buffer until the owner asks for the next head, which it does once
it has answered the current one, so requests are answered in order.

To answer, the owner asks for the bytes to write: `continue_response(head)` (the interim `100
Continue`, once, only when the client asked for it), then either `respond(head, status, fields,
body)` for an answer whose body is in hand, or `start_response(head, status, fields, ...)` (the
head, with the framing this connection decides: Content-Length, chunked, or a close that ends the
body), `send_data(chunk)` and `end_response(trailers)` for one produced as it goes (the trailer
fields go in the chunked body's trailer section). The connection decides
keep-alive: the request's wish, the response's own `Connection: close`, a body that only a close can
end, and the owner's reasons (a stopping server, an unread body) all count; `keep_alive` tells the
owner, after `end_response`, whether to read another request or close.

Framing rules: 1xx, 204 and 304 answers have no body and no Content-Length; a HEAD answer has
the GET answer's headers and no body; an answer of unknown length is chunked on HTTP/1.1 and
ends with the close on HTTP/1.0; Date and Server are added unless the response has its own;
Content-Length and Transfer-Encoding are the connection's alone. `Connection: close` ends an
answer the connection closes after, `Connection: keep-alive` one to an HTTP/1.0 client that
keeps it; an HTTP/1.1 connection that stays open says nothing (persistence is its default).
"""

from __future__ import annotations

import enum
import time
from typing import Final

from socketify.protocol.http11.events import RequestHead, Sentinel
from socketify.protocol.http11.parser import RequestParser
from socketify.protocol.http11.serializer import (
    DATE_CLOCK,
    SERVER_NAME,
    HeaderField,
    encode_chunk,
    error_response,
)
from socketify.protocol.http11.status import NO_BODY_STATUSES, STATUS_LINES, status_line

__all__ = ["CONTINUE", "Framing", "LocalProtocolError", "ServerConnection"]

_time: Final = time.time
CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"
_FRAMING_FIELDS: Final = frozenset({"content-length", "transfer-encoding"})
# Fields that are not just copied: the framing ones (refused), Connection, Date and Server.
_NOT_PLAIN: Final = _FRAMING_FIELDS | {"connection", "date", "server"}


class LocalProtocolError(Exception):
    """The owner asked for something HTTP/1.1 does not allow here (our bug, not the client's)."""


class Framing(enum.Enum):
    """How the body of the response being sent is delimited."""

    NONE = "none"  # no body on the wire: HEAD, 1xx, 204, 304, or an upgrade
    LENGTH = "length"  # Content-Length
    CHUNKED = "chunked"  # Transfer-Encoding: chunked
    CLOSE = "close"  # the body ends when the connection closes (HTTP/1.0, unknown length)


class ServerConnection:
    """The HTTP/1.1 state of one server connection: what was received, what may be sent."""

    __slots__ = ("_continued", "_framing", "_parser", "keep_alive")

    def __init__(
        self,
        max_header_size: int = 16384,
        max_target_size: int = 8192,
        max_body_size: int = 16 * 1024 * 1024,
        *,
        allow_bare_lf: bool = False,
    ) -> None:
        self._parser = RequestParser(
            max_header_size, max_target_size, max_body_size, allow_bare_lf=allow_bare_lf
        )
        self.keep_alive = True  # after end_response: whether another request may be read
        self._continued = False  # the 100 Continue for the current request went out
        self._framing: Framing | None = None  # set by start_response

    # -- receiving ----------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Add received bytes; `b""` means the peer will send nothing more."""
        self._parser.feed(data)

    def next_event(self) -> RequestHead | bytes | Sentinel:
        """The next event: a `RequestHead`, body bytes, `END_OF_MESSAGE`, `NEED_DATA`, `CLOSED`.

        Raises `ParseError` for input we refuse. The owner asks for the next head only once
        it has answered the current request, so pipelined requests are answered in order.
        """
        return self._parser.next_event()

    @property
    def buffered(self) -> int:
        """Bytes received but not yet turned into events."""
        return self._parser.buffered

    def peek(self, size: int) -> bytes:
        """The first `size` bytes received and not yet parsed, left in place."""
        return bytes(self._parser.input[:size])

    @property
    def trailers(self) -> tuple[tuple[str, str], ...]:
        """The trailer fields of the chunked body that just ended, as `(lower-case name, value)`.

        Read after `END_OF_MESSAGE`; fields no trailer may carry are already dropped (see
        `trailers.py`), and a body that was not chunked has none.
        """
        return self._parser.trailers

    def take_buffered(self) -> bytes:
        """Hand over the unparsed bytes (after an upgrade they belong to the new protocol)."""
        buffer = self._parser.input
        data = bytes(buffer)
        buffer.clear()
        return data

    # -- sending ------------------------------------------------------------------------------

    def continue_response(self, head: RequestHead) -> bytes:
        """The `100 Continue` for a request that expects one, once; otherwise b""."""
        if not head.expect_continue or self._continued or self._framing is not None:
            return b""
        self._continued = True
        return CONTINUE

    @property
    def continued(self) -> bool:
        """Whether the request being answered was told `100 Continue`."""
        return self._continued

    def start_response(
        self,
        head: RequestHead,
        status: int,
        fields: tuple[HeaderField, ...],
        *,
        length: int | None = 0,
        upgrade: bool = False,
        keep_alive: bool = True,
    ) -> bytes:
        """The head of the answer to the request `head`.

        `fields` are the answer's header fields in order (`header_field` made them): a Date or
        Server among them replaces ours; a Connection with `close` ends keep-alive,
        and an upgrade's Connection (`Upgrade`) is sent as given. `length` is the body's
        size, or None when unknown (a stream). `upgrade` sends the head of a protocol
        switch: no framing, the socket changes hands. `keep_alive=False` closes after this
        answer whatever else would allow.
        """
        if self._framing is not None:
            raise LocalProtocolError("the previous answer was not ended")
        data, self._framing, self.keep_alive = _answer_head(
            head, status, fields, length, upgrade, keep_alive
        )
        return data

    def respond(
        self,
        head: RequestHead,
        status: int,
        fields: tuple[HeaderField, ...],
        body: bytes,
        keep_alive: bool = True,
    ) -> bytes:
        """A whole answer whose body is in hand: the head, then the body unless it has none
        on the wire (HEAD, 1xx, 204, 304); `start_response` with `end_response` in one."""
        if self._framing is not None:
            raise LocalProtocolError("the previous answer was not ended")
        keep_alive = keep_alive and head.keep_alive
        # PERF: `_answer_head`'s lookup of a plain answer (the same key), written out for the
        # usual answer: a call less on every health check, JSON answer or pipelined request.
        if len(fields) <= 1 and _time() < _FRAMES.until:
            known = _FRAMES.plain.get(
                (status, fields, len(body), False, keep_alive, head.method, head.version)
            )
        else:
            known = None
        if known is None:
            known = _answer_head(head, status, fields, len(body), False, keep_alive)
        data, framing, self.keep_alive = known
        self._continued = False
        return data + body if framing is Framing.LENGTH else data

    @property
    def sends_body(self) -> bool:
        """Whether the answer started has body bytes on the wire (not HEAD, 204, 304...)."""
        return self._framing is not None and self._framing is not Framing.NONE

    def send_data(self, data: bytes) -> bytes:
        """The wire bytes for a piece of the body (chunk-encoded when chunked; b"" when none)."""
        framing = self._framing
        if framing is None:
            raise LocalProtocolError("start_response first")
        if framing is Framing.CHUNKED:
            return encode_chunk(data)
        return data if framing is not Framing.NONE else b""

    @property
    def sends_trailers(self) -> bool:
        """Whether the answer started can carry trailer fields: only a chunked one can."""
        return self._framing is Framing.CHUNKED

    def end_response(self, trailers: tuple[HeaderField, ...] = ()) -> bytes:
        """The bytes that end the answer (the last chunk), and the request's end for us.

        `trailers` (fields made by `trailer_field`) follow the last chunk of a chunked answer;
        an answer framed otherwise (a Content-Length, the close of an HTTP/1.0 answer, no
        body on the wire) has no place for them, and they are dropped.
        """
        framing = self._framing
        if framing is None:
            raise LocalProtocolError("start_response first")
        self._framing = None
        self._continued = False
        if framing is Framing.CLOSE:
            self.keep_alive = False
        if framing is not Framing.CHUNKED:
            return b""
        if not trailers:
            return b"0\r\n\r\n"
        return ("0\r\n" + "".join(field[3] for field in trailers) + "\r\n").encode("latin-1")

    def refuse(self, status: int, detail: str = "") -> bytes:
        """A complete `Connection: close` answer for input we refused; nothing follows it."""
        self.keep_alive = False
        self._framing = None
        return error_response(status, detail)


def _answer_head(
    head: RequestHead,
    status: int,
    fields: tuple[HeaderField, ...],
    length: int | None,
    upgrade: bool,
    keep_alive: bool,
) -> tuple[bytes, Framing, bool]:
    """(head bytes, body framing, keep-alive) of an answer to `head`; see `start_response`.

    PERF: what surrounds the answer's own fields (the status line, Date and Server, the
    framing and Connection lines) depends on a few values only and, within the second its
    Date names, is remembered: an answer costs its fields' lines and one lookup. A plain
    answer (a Content-Type at most, as a health check, a JSON API, a pipelining benchmark
    send) is remembered whole: one lookup.
    """
    keep_alive = keep_alive and head.keep_alive and not upgrade
    frames = _FRAMES
    if _time() >= frames.until:
        frames.start_second()
    if len(fields) > 1:
        return _render(head, status, fields, length, upgrade, keep_alive)
    key = (status, fields, length, upgrade, keep_alive, head.method, head.version)
    known = frames.plain.get(key)
    if known is None:
        known = _render(head, status, fields, length, upgrade, keep_alive)
        frames.keep_plain(key, known)
    return known


def _render(
    head: RequestHead,
    status: int,
    fields: tuple[HeaderField, ...],
    length: int | None,
    upgrade: bool,
    keep_alive: bool,
) -> tuple[bytes, Framing, bool]:
    """(head bytes, body framing, keep-alive), made from the fields and the remembered frame."""
    own = ""  # the lower-case names of the fields that replace ours ("date", "server"), joined
    connection: str | None = None
    lines = ""
    for lower, name, value, line in fields:
        if lower in _NOT_PLAIN:
            if lower in _FRAMING_FIELDS:
                raise LocalProtocolError(f"{name} is the connection's to send")
            if lower == "connection":
                connection = value
                if "close" in (token.strip().lower() for token in value.split(",")):
                    keep_alive = False
                continue
            own += lower
        lines += line
    key = (status, length, upgrade, keep_alive, head.method, head.version, own, connection)
    frames = _FRAMES
    frame = frames.frames.get(key)
    if frame is None:
        frame = _frame(status, length, upgrade, keep_alive, head, own, connection)
        frames.keep(key, frame)
    start, end, framing, keep_alive = frame
    return f"{start}{lines}{end}".encode("latin-1"), framing, keep_alive


def _frame(
    status: int,
    length: int | None,
    upgrade: bool,
    keep_alive: bool,
    head: RequestHead,
    own: str,
    connection: str | None,
) -> tuple[str, str, Framing, bool]:
    """What surrounds an answer's own fields: (status and Date/Server lines, framing and
    Connection lines with the blank line, body framing, keep-alive)."""
    start = STATUS_LINES.get(status) or status_line(status)
    if not own:
        start += DATE_CLOCK.get()
    elif "date" not in own:
        start += f"Date: {DATE_CLOCK.get_date()}\r\n"
    elif "server" not in own:
        start += f"Server: {SERVER_NAME}\r\n"
    end = ""
    if upgrade:
        framing = Framing.NONE
    elif status in NO_BODY_STATUSES:
        framing = Framing.NONE  # no content, so no Content-Length either
    elif length is not None:
        framing = Framing.LENGTH
        end = f"Content-Length: {length}\r\n"
    elif head.version == "HTTP/1.0":
        framing = Framing.CLOSE
        keep_alive = False
    else:
        framing = Framing.CHUNKED
        end = "Transfer-Encoding: chunked\r\n"
    if head.method == "HEAD" and framing is not Framing.NONE:
        framing = Framing.NONE  # the GET answer's headers, no body
    if not upgrade or connection is None:
        if not keep_alive:
            connection = "close"
        elif head.version == "HTTP/1.0":
            connection = "keep-alive"  # HTTP/1.0 closes unless the answer says otherwise
        else:
            connection = None  # HTTP/1.1 keeps the connection unless told (RFC 9112 §9.3)
    if connection is not None:
        end += f"Connection: {connection}\r\n"
    return start, end + "\r\n", framing, keep_alive


_Frame = tuple[str, str, Framing, bool]


class _FrameCache:
    """Frames made during the current Date second (they hold its Date line), and the whole
    heads of plain answers made of them; bounded."""

    def __init__(self) -> None:
        self.frames: dict[tuple[object, ...], _Frame] = {}
        self.plain: dict[tuple[object, ...], tuple[bytes, Framing, bool]] = {}
        self.until = 0.0  # when this second's frames go stale

    def start_second(self) -> None:
        """Forget the last second's frames, and the plain heads made of them."""
        self.frames.clear()
        self.plain.clear()
        self.until = float(int(_time()) + 1)

    def keep(self, key: tuple[object, ...], frame: _Frame) -> None:
        """Remember a frame; a full cache starts over."""
        if len(self.frames) >= _FRAMES_KEPT:
            self.frames.clear()
            self.plain.clear()
        self.frames[key] = frame

    def keep_plain(self, key: tuple[object, ...], known: tuple[bytes, Framing, bool]) -> None:
        """Remember a plain answer's head; a full table starts over."""
        if len(self.plain) >= _FRAMES_KEPT:
            self.plain.clear()
        self.plain[key] = known


_FRAMES_KEPT: Final = 256
_FRAMES: Final = _FrameCache()
