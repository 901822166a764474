"""`Answer`: the WSGI side of one response — `start_response`, `write()` and the iterable —
turned into the `Response` the connection writes.

Theory of operation. `start_response` only records the status and headers; they become the
response's when the first non-empty body chunk exists (or the body ended empty), which is the
moment PEP 3333 calls "headers sent". Until then a second `start_response` with `exc_info`
replaces them (an error page instead of the page that failed); after it, `exc_info` is raised
again, since the client already has the first status. A second call without `exc_info` is an
error of the app's.

The iterable is turned into one of the response's body kinds:

- a list or tuple (what most frameworks return): its chunks joined, a buffered answer;
- our `FileWrapper` around a file on disk: a file range, sent with sendfile;
- anything else: its first non-empty chunk is pulled in the handler (the status may only be
  set then). A body that ended there, or whose first chunk is its whole Content-Length (a
  framework's usual answer), is buffered; any other streams as the connection writes it,
  each chunk as soon as the app yields it, with the app's Content-Length or chunked.

The Content-Length an app sends is kept (HEAD answers carry it; a body longer than it is cut
to it; one that falls short ends the connection, as gunicorn does); the framing headers are
otherwise the connection's. The iterable's `close()` is a close callback of the response, so
it runs once the answer is written or abandoned: a client that left, an app that raised.
`write()` data is held and sent ahead of the iterable's first chunk (PEP 3333 allows
"buffered for transmission").
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING

from socketify.wsgi.file_wrapper import FileWrapper, file_range

if TYPE_CHECKING:
    from socketify.core.response import Response

__all__ = ["Answer", "parse_status"]

# Hop-by-hop fields are the server's: an app must not send them (PEP 3333).
_HOP_BY_HOP = frozenset(
    {
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
_SEQUENCES = (list, tuple)

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


def parse_status(status: object) -> int:
    """The code of a WSGI status line such as "200 OK"; ValueError for anything else."""
    if not isinstance(status, str):
        raise TypeError(f"the WSGI status must be a str, not {type(status).__name__}")
    code = status[:3]
    if len(status) < 4 or status[3] != " " or not code.isdigit() or code[0] == "0":
        raise ValueError(f"invalid WSGI status {status!r}: expected '200 OK'")
    return int(code)


# PERF: an app sends a handful of status lines; each is parsed once (a lookup after that).
# Bounded: a full table starts over. Its values are ints: nothing in it can change.
_STATUS_CODES: dict[str, int] = {}
_STATUS_CODES_KEPT = 256


class Answer:
    """`start_response` and `write` for one request, and the app's result into `res`."""

    __slots__ = ("_committed", "_headers", "_length", "_pending", "_sent", "_status", "res")

    def __init__(self, res: Response) -> None:
        self.res = res
        self._status: int | None = None
        self._headers: list[tuple[str, str]] = []
        self._length: int | None = None  # the app's Content-Length
        self._sent = False  # PEP 3333's "headers sent": exc_info is raised again from now
        self._committed = False  # the status and headers were handed to `res`
        self._pending: list[bytes] | None = None  # what write() was given, not yet sent

    # -- what the app calls -----------------------------------------------------------------

    def start_response(
        self, status: str, headers: list[tuple[str, str]], exc_info: ExcInfo | None = None
    ) -> Callable[[bytes], None]:
        """Record the status and headers; returns the `write` callable."""
        if exc_info is not None:
            try:
                if self._sent:
                    raise exc_info[1].with_traceback(exc_info[2])
            finally:
                exc_info = None  # no reference cycle through the traceback
        elif self._status is not None:
            raise RuntimeError("start_response was called twice without exc_info")
        code = _STATUS_CODES.get(status) if status.__class__ is str else None
        if code is None:
            code = parse_status(status)
            if len(_STATUS_CODES) >= _STATUS_CODES_KEPT:
                _STATUS_CODES.clear()
            _STATUS_CODES[status] = code
        if headers.__class__ is not list:
            raise TypeError(f"WSGI headers must be a list, not {type(headers).__name__}")
        self._status = code
        self._headers = headers
        return self.write

    def write(self, data: bytes) -> None:
        """The legacy `write()` callable: `data` goes out ahead of the returned iterable."""
        if self._status is None:
            raise RuntimeError("write() was called before start_response")
        if type(data) is not bytes:
            raise TypeError(f"write() takes bytes, not {type(data).__name__}")
        if not data:
            return
        self._sent = True
        if self._pending is None:
            self._pending = [data]
        else:
            self._pending.append(data)

    # -- the result -------------------------------------------------------------------------

    def respond(self, result: Iterable[bytes]) -> None:
        """Turn the app's `result` into the response's status, headers and body."""
        res = self.res
        close = getattr(result, "close", None)
        if close is not None:
            res.call_on_close(close)
        if result.__class__ in _SEQUENCES:
            self._send(_joined(result))
            return
        if result.__class__ is FileWrapper and self._pending is None:
            assert isinstance(result, FileWrapper)
            if self._send_file(result):
                return
        rest = iter(result)
        for first in rest:
            if first.__class__ is not bytes:
                raise TypeError(f"a WSGI body chunk must be bytes, not {type(first).__name__}")
            if first:
                break
        else:
            self._send(b"")  # the body ended empty: what write() was given, if anything
            return
        chunks = self._pending or []  # write() may have been called while it was produced
        self._pending = None
        chunks.append(first)
        self._commit()
        length = self._length
        if length is not None and sum(map(len, chunks)) >= length:
            self._send(b"".join(chunks))  # the whole body came in one piece
            return
        res.stream(itertools.chain(chunks, self._checked(rest)), length=length)

    def _checked(self, rest: Iterator[bytes]) -> Iterator[bytes]:
        """The iterable's remaining chunks, type-checked, with any `write()` data in order."""
        for chunk in rest:
            pending = self._pending
            if pending is not None:
                self._pending = None
                yield from pending
            if chunk.__class__ is not bytes:
                raise TypeError(f"a WSGI body chunk must be bytes, not {type(chunk).__name__}")
            yield chunk
        if self._pending is not None:
            yield from self._pending

    def _send(self, body: bytes) -> None:
        """A body in hand: one buffered answer (for HEAD, with the length the app gave)."""
        pending = self._pending
        if pending is not None:
            self._pending = None
            body = b"".join(pending) + body
        self._commit()
        res = self.res
        length = self._length
        if length is not None and length != len(body):
            if res.head_only:
                res.stream((), length=length)  # the GET answer's length, no body
                return
            if len(body) > length:
                body = body[:length]  # never more than the app said
            elif res.sends_body:
                res.stream((body,), length=length)  # short: the connection cuts it off
                return
        if body and res.content_type is None:
            # `send` would guess a Content-Type; a WSGI app that sent none gets none.
            res.stream((body,), length=len(body))
            return
        res.send(body)

    def _send_file(self, wrapper: FileWrapper) -> bool:
        """A wrapped file on disk as a file range (sendfile); False to iterate it instead."""
        found = file_range(wrapper)
        if found is None:
            return False
        self._commit()
        path, offset, left = found
        length = self._length
        if length is not None:
            if length > left:
                return False  # it promised more than the file holds: streamed, then cut off
            left = length
        return self.res.send_file(path, offset=offset, length=left)

    def _commit(self) -> None:
        """The recorded status and headers become the response's ("headers sent"), once."""
        if self._committed:
            return
        if self._status is None:
            raise RuntimeError("the WSGI app returned a body without calling start_response")
        self._committed = self._sent = True
        res = self.res
        res.status_code = self._status  # a code parse_status checked: 100 to 999
        fields, content_type, self._length = _plan(self._headers)
        add = res.add_header
        for name, value in fields:
            add(name, value)
        if content_type is not None:
            res.set_header(*content_type)


# PERF: an app answers with the same few header lists (a framework's, for each kind of
# answer): each distinct list is checked and split once, and its plan reused; a plan holds
# only str tuples and an int: immutable. Bounded: a full table starts over.
Field = tuple[str, str]
Plan = tuple[tuple[Field, ...], Field | None, int | None]
_PLANS: dict[tuple[Field, ...], Plan] = {}
_PLANS_KEPT = 256


def _plan(headers: list[Field]) -> Plan:
    """What the response takes of a WSGI header list: its fields but the framing ones, its
    (last) Content-Type field apart, and the app's Content-Length; TypeError or ValueError for
    a list that breaks PEP 3333."""
    try:
        key = tuple(headers)
        plan = _PLANS.get(key)
    except TypeError:  # a field that cannot be hashed is no (str, str) tuple
        return _checked_plan(headers)  # which says so
    if plan is None:
        plan = _checked_plan(headers)
        if len(_PLANS) >= _PLANS_KEPT:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


def _checked_plan(headers: list[Field]) -> Plan:
    """`_plan`'s answer, worked out field by field."""
    fields = []
    content_type = None
    length = None
    for field in headers:
        if field.__class__ is not tuple or len(field) != 2:
            raise TypeError(f"a WSGI header must be a (str, str) tuple, not {field!r}")
        name, value = field
        if name.__class__ is not str or value.__class__ is not str:
            raise TypeError(f"a WSGI header must be a (str, str) tuple, not {field!r}")
        lower = name.lower()
        if lower == "content-type":
            content_type = field  # one value: a later one replaces it, as set_header does
        elif lower == "content-length":
            length = _content_length(value)
        elif lower not in _HOP_BY_HOP:
            fields.append(field)
    return tuple(fields), content_type, length


def _joined(chunks: list[bytes] | tuple[bytes, ...]) -> bytes:
    """The chunks of a list body as one bytes object; TypeError for a str among them."""
    if len(chunks) == 1 and chunks[0].__class__ is bytes:
        return chunks[0]
    for chunk in chunks:
        if chunk.__class__ is not bytes:
            raise TypeError(f"a WSGI body chunk must be bytes, not {type(chunk).__name__}")
    return b"".join(chunks)


def _content_length(value: str) -> int:
    """The app's Content-Length header as an int; ValueError for anything but digits."""
    text = value.strip()
    if not text.isdigit() or not text.isascii():
        raise ValueError(f"invalid Content-Length from the WSGI app: {value!r}")
    return int(text)
