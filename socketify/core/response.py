"""`Response`: what a handler builds; the connection turns it into bytes.

Theory of operation. Handlers and middleware only record: status, headers, cookies and one
body kind — buffered bytes, a file range (for sendfile), an iterable stream, or an `upgrade`
callable that takes the connection over (SSE, Pulse). Nothing is written until the whole chain
has returned, so middleware can still add headers after `next()`. The connection then reads the
answer through the public surface — `status_code`, `fields()`, `body_length` and the body kind
— and its protocol decides the framing (Content-Length, chunked, HEAD, keep-alive).

Everything a client could use to split a response is refused when it is set, not when it is
written: CR, LF or NUL in a header name or value, bad cookie names, unsafe redirect targets.
Content-Length and Transfer-Encoding are the connection's alone; Date, Server and Connection
set here replace the connection's own.

A streamed answer can end with trailer fields (`set_trailer`), values known only once the
body is out: a digest, a status of the work the stream did. HTTP/2 sends them as a final
HEADERS frame, HTTP/1.1 in the chunked body's trailer section; those set before the head goes
out are announced in a `Trailer` header. An answer with a Content-Length (bytes, a file), one
with no body on the wire (HEAD, 204, 304) and one to an HTTP/1.0 client (its body ends with
the connection) have no place for them: there they are dropped.
"""

from __future__ import annotations

import html
import itertools
import logging
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

import orjson

from socketify.core.cookies import build_set_cookie, expired_cookie
from socketify.core.headers import Headers, content_disposition
from socketify.core.mime import DEFAULT_TYPE, guess_type
from socketify.protocol.http.trailers import trailer_field
from socketify.protocol.http11.serializer import HeaderField, check_header_value, header_field
from socketify.protocol.http11.status import NO_BODY_STATUSES, reason

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.templates import Templates

__all__ = ["APPLICATION_JSON", "TEXT_HTML", "TEXT_PLAIN", "BodyData", "Response"]

TEXT_PLAIN: Final = "text/plain; charset=utf-8"
TEXT_HTML: Final = "text/html; charset=utf-8"
APPLICATION_JSON: Final = "application/json; charset=utf-8"
_JSON_CONTENT_TYPE: Final = header_field("Content-Type", APPLICATION_JSON)
# PERF: `Final` names of orjson's: a compiled build reads them without a module lookup each.
_dumps: Final = orjson.dumps
_NON_STR_KEYS: Final = orjson.OPT_NON_STR_KEYS

# What a buffered body may be given as: text (sent UTF-8) or any bytes-like object.
BodyData = str | bytes | bytearray | memoryview

_FRAMING: Final = frozenset({"content-length", "transfer-encoding"})  # the connection's alone
_SINGLE: Final = frozenset({"date", "server", "connection"})  # a second value replaces the first
# Headers that describe the old body; an error page must not inherit them.
_ENTITY: Final = frozenset({"content-disposition", "content-encoding", "content-range"})
_HTML_START: Final = (b"<!doctype", b"<html")

error_log = logging.getLogger("socketify.error")


class Response:
    """The answer being built for one request; serialized after the chain returns."""

    __slots__ = (
        "_body",
        "_chunks",
        "_closers",
        "_content_type",
        "_cookies",
        "_fields",
        "_trailers",
        "ended",
        "file_length",
        "file_offset",
        "file_path",
        "head_only",
        "status_code",
        "stream_iter",
        "stream_length",
        "templates",
        "upgrade",
    )

    def __init__(self, request: Request | None = None) -> None:
        self.status_code = 200  # set with `status()`, which checks it
        self._fields: list[HeaderField] | None = None
        self._content_type: HeaderField | None = None  # kept apart: one value, sent last
        self._cookies: list[str] | None = None
        self._body = b""
        self._chunks: list[bytes] | None = None
        self.ended = False  # True once a body was chosen (send, json, end, send_file, stream...)
        self.file_path: str | None = None
        self.file_offset = 0
        self.file_length = 0
        self.stream_iter: Iterable[bytes | str] | None = None
        self.stream_length: int | None = None  # a stream's declared size, if it has one
        self._closers: list[Callable[[], object]] | None = None
        self.upgrade: Callable[[Any], Any] | None = None
        self._trailers: list[HeaderField] | None = None
        # The app's templates (`Server(templates=...)`), set by the app before its chain runs.
        self.templates: Templates | None = None
        # A HEAD answer: the GET answer's headers, and no body on the wire.
        self.head_only = request is not None and request.method == "HEAD"

    # -- status and headers ---------------------------------------------------------------

    def status(self, code: int) -> Response:
        """Set the status code (100-999; ValueError outside, TypeError for a non-int); chains."""
        if not isinstance(code, int):
            raise TypeError(f"a status code is an int, not {type(code).__name__}")
        if isinstance(code, bool) or not 100 <= code <= 999:
            raise ValueError(f"invalid status code {code!r}")
        self.status_code = int(code)
        return self

    def set_header(self, name: str, value: object) -> Response:
        """Set header `name` (case-insensitive), replacing earlier values; chains.

        A value that is not text is sent as its `str()` (`res.set_header("X-Count", 3)`).
        """
        field = header_field(name, value)
        lower = field[0]
        if lower == "content-type":
            self._content_type = field
        elif lower in _FRAMING:
            pass  # framing is the connection's: a wrong value would desynchronise the client
        elif self._fields is None:
            self._fields = [field]
        else:
            self._remove(lower)
            self._fields.append(field)
        return self

    def add_header(self, name: str, value: object) -> Response:
        """Add one more value for header `name` (sent as its own line); chains.

        Content-Type, Date, Server and Connection have one value: adding replaces. A value
        that is not text is sent as its `str()`.
        """
        field = header_field(name, value)
        lower = field[0]
        if lower == "content-type" or lower in _SINGLE:
            return self.set_header(name, value)
        if lower not in _FRAMING:
            self._append(field)
        return self

    def get_header(self, name: str, default: str | None = None) -> str | None:
        """Return the value of header `name` (repeats joined with ", "), or `default`."""
        lower = name.lower()
        if lower == "content-type":
            value = self.content_type
        else:
            found = [field[2] for field in self._fields or () if field[0] == lower]
            value = ", ".join(found) if found else None
        return default if value is None else value

    def remove_header(self, name: str) -> Response:
        """Remove every value of header `name`; chains."""
        lower = name.lower()
        if lower == "content-type":
            self._content_type = None
        else:
            self._remove(lower)
        return self

    def _append(self, field: HeaderField) -> None:
        if self._fields is None:
            self._fields = [field]
        else:
            self._fields.append(field)

    def _remove(self, lower: str) -> None:
        fields = self._fields
        if fields is None:
            return
        for field in fields:
            if field[0] == lower:
                fields[:] = [kept for kept in fields if kept[0] != lower]
                return

    @property
    def close_connection(self) -> bool:
        """True when a `Connection: close` header asks to close after this answer."""
        value = self.get_header("connection") or ""
        return "close" in (token.strip().lower() for token in value.split(","))

    # -- buffered bodies ------------------------------------------------------------------

    def send(self, body: BodyData = b"", content_type: str | None = None) -> bool:
        """Send `body` and end; Content-Type is `content_type` (or sniffed) unless already set.

        Returns False, changing nothing, if the response had already ended.
        """
        if self.ended:
            return False
        if type(body) is bytes:
            data = body
        else:
            data = body.encode() if type(body) is str else _as_bytes(body)
        if self._chunks:
            data = b"".join(self._chunks) + data
            self._chunks = None
        if self._content_type is None:
            if content_type is not None:
                self._content_type = header_field("Content-Type", content_type)
            elif data:
                self._content_type = header_field("Content-Type", _sniff(data))
        self._body = data
        self.ended = True
        return True

    def html(self, body: BodyData) -> bool:
        """Send an HTML body (`text/html; charset=utf-8` unless a type is set)."""
        return self.send(body, TEXT_HTML)

    # The template's name is positional-only by the double-underscore convention rather than
    # `/`: a compiled build (mypyc) honours only the former, and would refuse a context key
    # called `name` as given twice.
    def render(self, __name: str, **context: Any) -> bool:
        """Send the Jinja2 template `__name` rendered with `context` (needs `Server(templates=)`).

        The Content-Type follows the template's extension (`page.html` is HTML, `feed.xml`
        XML; HTML for one it does not know) unless one is set. Raises `TemplatesUnavailable`
        without a template folder or without Jinja2, and Jinja2's `TemplateNotFound` for a
        name the folder lacks. Any keyword is a context key, `name` too.
        """
        name = __name
        if self.ended:
            return False
        if self.templates is None:
            from socketify.core.templates import TemplatesUnavailable

            raise TemplatesUnavailable(
                f"res.render({name!r}) needs a template folder: Server(templates='templates')"
            )
        body = self.templates.render(name, **context)
        kind = guess_type(name)
        # A template named without a known extension (`mail.jinja`) is taken for HTML.
        return self.send(body, TEXT_HTML if kind == DEFAULT_TYPE else kind)

    def json(self, obj: Any) -> bool:
        """Send `obj` as compact JSON; always `application/json; charset=utf-8`."""
        if self.ended:
            return False
        self._content_type = _JSON_CONTENT_TYPE
        return self.send(_dumps(obj, option=_NON_STR_KEYS))

    def json_error(self, status: int, message: str) -> bool:
        """Send `{"error": message}` with `status`."""
        return self.status(status).json({"error": message})

    def send_status(self, code: int) -> bool:
        """Send `code` with the body `<Reason>\\n` (no body for 1xx, 204 and 304)."""
        if self.ended:
            return False
        self.status(code)
        if code in NO_BODY_STATUSES:
            return self.send(b"")
        return self.send(reason(code) + "\n", TEXT_PLAIN)

    def write(self, chunk: BodyData) -> bool:
        """Append to the buffered body; False once ended."""
        if self.ended:
            return False
        data = chunk.encode() if type(chunk) is str else _as_bytes(chunk)
        if self._chunks is None:
            self._chunks = [data]
        else:
            self._chunks.append(data)
        return True

    def end(self, chunk: BodyData | None = None) -> bool:
        """Finish the response with what was written (plus `chunk`); False if already ended."""
        if self.ended:
            return False
        return self.send(b"" if chunk is None else chunk)

    def redirect(self, url: str, code: int = 302) -> bool:
        """Redirect to `url` (CR/LF/NUL refused; non-ASCII percent-encoded; body escaped)."""
        if self.ended:
            return False
        if "\r" in url or "\n" in url or "\x00" in url:
            raise ValueError("redirect URL must not contain CR, LF or NUL")
        location = quote(url, safe="!#$%&'()*+,/:;=?@[]~")
        self.status(code).set_header("Location", location)
        shown = html.escape(location)
        self._content_type = header_field("Content-Type", TEXT_HTML)
        return self.send(
            "<!DOCTYPE html><html><head><title>Redirect</title></head>"
            f'<body>Redirecting to <a href="{shown}">{shown}</a></body></html>\n'
        )

    # -- other body kinds -----------------------------------------------------------------

    def send_file(
        self,
        path: str | os.PathLike[str],
        download: bool = False,
        name: str | None = None,
        *,
        offset: int = 0,
        length: int | None = None,
    ) -> bool:
        """Send a regular file (or a byte range of it) with sendfile; False if unusable.

        Content-Type comes from the extension unless set; `download` adds a
        Content-Disposition naming `name` or the file's base name.
        """
        if self.ended:
            return False
        fspath = os.fspath(path)
        try:
            info = os.stat(fspath)
        except (OSError, ValueError):
            return False
        if not stat.S_ISREG(info.st_mode) or not os.access(fspath, os.R_OK):
            return False
        size = info.st_size
        if length is None:
            length = size - offset
        if offset < 0 or length < 0 or offset + length > size:
            return False
        if download:
            disposition = content_disposition(name or os.path.basename(fspath))
            self.set_header("Content-Disposition", disposition)
        if self._content_type is None:
            self._content_type = header_field("Content-Type", guess_type(fspath))
        self.file_path = fspath
        self.file_offset = offset
        self.file_length = length
        self._chunks = None
        self.ended = True
        return True

    def stream(self, iterable: Iterable[bytes | str], length: int | None = None) -> bool:
        """Send `iterable` chunk by chunk, flushed as produced.

        Without `length` the body is chunked (or ends with the connection on HTTP/1.0); with
        it, it is sent with that Content-Length, and must come to exactly that many bytes:
        what goes past is dropped, and a stream that ends short cuts the connection.
        """
        if self.ended:
            return False
        if length is not None and (isinstance(length, bool) or length < 0):
            raise ValueError(f"invalid stream length {length!r}")
        if self._chunks:  # what was written before goes first
            iterable = itertools.chain(self._chunks, iterable)
            self._chunks = None
        self.stream_iter = iterable
        self.stream_length = length
        self.ended = True
        return True

    def set_trailer(self, name: str, value: str) -> Response:
        """Send `name: value` after a streamed body, replacing an earlier value; chains.

        Call it before `stream()` or from the stream's iterable while it runs: the
        connection reads the trailers once the iterable is exhausted. Those set before the
        head goes out are announced in a `Trailer` header (for a value known only at the
        end, announce the name yourself: `set_header("Trailer", name)`). They are sent on
        HTTP/2 and on chunked HTTP/1.1 answers; an answer with a Content-Length (bytes, a
        file), none on the wire (HEAD, 204, 304) or to an HTTP/1.0 client drops them.

        ValueError for a name a trailer must not carry (framing, routing, authentication,
        `Content-*`...; see `socketify.protocol.http.trailers`) or an unsafe value;
        RuntimeError when this answer already has a buffered or file body.
        """
        field = trailer_field(name, value)
        if self.ended and self.stream_iter is None:
            raise RuntimeError(
                "trailers follow a streamed body (res.stream); this answer's length is known"
            )
        trailers = self._trailers
        if trailers is None:
            self._trailers = [field]
        else:
            trailers[:] = [kept for kept in trailers if kept[0] != field[0]]
            trailers.append(field)
        return self

    @property
    def trailers(self) -> Headers:
        """A read-only snapshot of the trailer fields set so far."""
        return Headers([(field[1], field[2]) for field in self._trailers or ()], readonly=True)

    def trailer_fields(self) -> tuple[HeaderField, ...]:
        """The trailer fields to send after a streamed body, in the order they were set."""
        return tuple(self._trailers) if self._trailers else ()

    def iter_stream(self) -> Iterator[bytes]:
        """Yield the stream's chunks as non-empty bytes (an empty one would end chunking)."""
        if self.stream_length is not None:
            yield from self._iter_sized(self.stream_length)
            return
        for item in self.stream_iter or ():
            data = item.encode() if isinstance(item, str) else bytes(item)
            if data:
                yield data

    def _iter_sized(self, left: int) -> Iterator[bytes]:
        for item in self.stream_iter or ():
            if not left:
                break
            data = item.encode() if isinstance(item, str) else bytes(item)
            if len(data) > left:
                data = data[:left]  # never more than the Content-Length promised
            if data:
                left -= len(data)
                yield data
        if left:
            raise ValueError(f"the stream ended {left} bytes short of its declared length")

    # -- the end of the exchange ----------------------------------------------------------

    def call_on_close(self, callback: Callable[[], object]) -> Response:
        """Run `callback()` once the answer was written, or abandoned (the client left,
        the stream failed); callbacks run in the order they were added. Chains."""
        if self._closers is None:
            self._closers = [callback]
        else:
            self._closers.append(callback)
        return self

    def close(self) -> None:
        """Run the `call_on_close` callbacks (once); the server calls this after each answer.

        A callback that raises is logged, and the others still run.
        """
        closers = self._closers
        if closers is None:
            return
        self._closers = None
        for callback in closers:
            try:
                callback()
            except Exception:
                error_log.exception("a response close callback failed")

    # -- cookies --------------------------------------------------------------------------

    def set_cookie(
        self,
        name: str,
        value: str,
        max_age: int | timedelta | None = None,
        expires: datetime | float | None = None,
        path: str | None = "/",
        domain: str | None = None,
        secure: bool = False,
        http_only: bool = False,
        same_site: str | None = None,
    ) -> Response:
        """Queue one Set-Cookie line; invalid names or unsafe characters raise ValueError."""
        line = build_set_cookie(
            name, value, max_age=max_age, expires=expires, path=path, domain=domain,
            secure=secure, http_only=http_only, same_site=same_site,
        )  # fmt: skip
        return self._add_cookie(line)

    def clear_cookie(
        self, name: str, path: str | None = "/", domain: str | None = None
    ) -> Response:
        """Queue a Set-Cookie line that deletes cookie `name`."""
        return self._add_cookie(expired_cookie(name, path, domain))

    def _add_cookie(self, line: str) -> Response:
        check_header_value(line)  # also proves the line encodes to latin-1
        if self._cookies is None:
            self._cookies = [line]
        else:
            self._cookies.append(line)
        return self

    # -- introspection --------------------------------------------------------------------

    @property
    def content_type(self) -> str | None:
        """The Content-Type set so far, or None."""
        return None if self._content_type is None else self._content_type[2]

    @property
    def headers(self) -> Headers:
        """A read-only snapshot of the headers set so far (cookies excluded)."""
        items = [(field[1], field[2]) for field in self._fields or ()]
        if self._content_type is not None:
            items.append(("Content-Type", self._content_type[2]))
        return Headers(items, readonly=True)

    @property
    def cookies(self) -> list[str]:
        """The queued Set-Cookie values, in order."""
        return list(self._cookies or ())

    @property
    def kind(self) -> str:
        """The body kind: "buffered", "file", "stream" or "upgrade"."""
        if self.upgrade is not None:
            return "upgrade"
        if self.stream_iter is not None:
            return "stream"
        if self.file_path is not None:
            return "file"
        return "buffered"

    @property
    def body(self) -> bytes:
        """The buffered body (what was sent or written so far)."""
        if self._chunks:
            return self._body + b"".join(self._chunks)
        return self._body

    @property
    def sends_body(self) -> bool:
        """False for HEAD and for 1xx/204/304 answers: the head is the whole response."""
        return not self.head_only and self.status_code not in NO_BODY_STATUSES

    def replace_body(self, data: bytes) -> None:
        """Swap the buffered body (e.g. for its compressed form) keeping the headers."""
        self._chunks = None
        self._body = data

    # -- what the connection writes -------------------------------------------------------

    def fields(self) -> tuple[HeaderField, ...]:
        """The header fields to send, in order: the handler's, Set-Cookie lines, Content-Type."""
        fields = tuple(self._fields) if self._fields else ()
        if self._cookies:
            fields += tuple(
                [("set-cookie", "Set-Cookie", c, f"Set-Cookie: {c}\r\n") for c in self._cookies]
            )
        if self._content_type is not None:
            fields += (self._content_type,)
        if self._trailers and self.stream_iter is not None:
            fields += self._trailer_announcement(fields)
        return fields

    def _trailer_announcement(self, fields: tuple[HeaderField, ...]) -> tuple[HeaderField, ...]:
        """The `Trailer` field naming the trailers set so far, unless the handler set one."""
        if any(field[0] == "trailer" for field in fields):
            return ()
        names = ", ".join(field[1] for field in self._trailers or ())
        return (header_field("Trailer", names),)

    @property
    def body_length(self) -> int | None:
        """The body's size in bytes: buffered, a file range or a sized stream; else None."""
        if self.upgrade is not None:
            return None
        if self.stream_iter is not None:
            return self.stream_length
        if self.file_path is not None:
            return self.file_length
        if self._chunks:
            return len(self._body) + sum(map(len, self._chunks))
        return len(self._body)

    # -- error handling support for the application ---------------------------------------

    def reset_for_error(self) -> None:
        """Drop the body, status and entity headers, keeping other headers and cookies."""
        self.status_code = 200
        self._body = b""
        self._chunks = None
        self.ended = False
        self._content_type = None
        self.file_path = None
        self.stream_iter = None
        self.stream_length = None
        self.upgrade = None
        self._trailers = None
        if self._fields:
            self._fields[:] = [field for field in self._fields if field[0] not in _ENTITY]

    def __repr__(self) -> str:
        return f"<Response {self.status_code} {self.kind}{' ended' if self.ended else ''}>"


def _as_bytes(body: object) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, bytearray | memoryview):
        return bytes(body)
    raise TypeError(f"body must be str or bytes, not {type(body).__name__}")


def _sniff(data: bytes) -> str:
    """An HTML-looking body is text/html, anything else text/plain."""
    start = data[:64].lstrip().lower()
    return TEXT_HTML if start.startswith(_HTML_START) else TEXT_PLAIN
