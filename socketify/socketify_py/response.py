"""socketify.py's `AppResponse`, a face over Socketify's Response.

socketify.py (and uWebSockets under it) hands a handler `(res, req)`: a response with
`write_status`, `write_header`, `end`... that return the response for chaining. This class
gives that surface to handlers served by Socketify. It keeps nothing of its own beyond what
socketify.py keeps per request (the data, writable and abort callbacks, a body in pieces);
every write goes to the Socketify `Response` of the request, so headers, cookies,
compression, HEAD and keep-alive behave as for any Socketify handler.

What differs, by design:
- `write()` buffers; the body goes out with `end()` (one answer per handler, as Socketify's
  handlers give). A handler that returns (its `run_async` tasks done) without `end()`
  answers an empty 200.
- `get_data`, `get_json`, `get_text` and `get_form_urlencoded` are awaitables, as in
  socketify.py: `await res.get_json()` in an `async def` handler. The body is read in the
  request's own greenlet, not on the event loop. A plain `def` handler reads the body through
  `req.request` (the Socketify Request: `.body`, `.json()`, `.form()`).
- A body of known size written in pieces (`try_end`, `send_chunk`, `on_writable`,
  `get_write_offset`) streams through `socketify.socketify_py.streaming`.
- Calls that steer uWebSockets' own socket (`pause`, `resume`, `get_native_handle`) raise
  `NotImplementedError` naming what to use instead.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import Callable, Generator, Iterable
from datetime import datetime
from io import BytesIO
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs

from socketify.core.coroutines import runner
from socketify.core.request import Request
from socketify.core.response import Response
from socketify.socketify_py.errors import unsupported
from socketify.socketify_py.request import as_text
from socketify.socketify_py.streaming import ChunkStream

if TYPE_CHECKING:
    from socketify.socketify_py.app import App

__all__ = ["AppResponse", "JsonSerializer"]


class JsonSerializer(Protocol):
    """What `app.json_serializer(module)` takes: a module or object with dumps and loads."""

    def dumps(self, obj: Any, /) -> str | bytes:
        """Encode `obj`."""

    def loads(self, data: str | bytes, /) -> Any:
        """Decode `data`."""


def _as_bytes(message: Any, serializer: JsonSerializer = json) -> tuple[bytes, bool]:
    """socketify.py's conversion of a body: (bytes, whether it was JSON-encoded)."""
    if isinstance(message, bytes):
        return message, False
    if isinstance(message, str):
        return message.encode("utf-8"), False
    if isinstance(message, bytearray | memoryview):
        return bytes(message), False
    encoded = serializer.dumps(message)
    return (encoded.encode("utf-8") if isinstance(encoded, str) else bytes(encoded)), True


def _inside_task() -> bool:
    try:
        return asyncio.current_task() is not None
    except RuntimeError:  # no event loop running in this thread
        return False


class _BodyAwaitable:
    """An awaitable body read: the read runs in the request's greenlet, not on the loop."""

    __slots__ = ("read",)

    def __init__(self, read: Callable[[], Any]) -> None:
        self.read = read

    def __await__(self) -> Generator[Any, None, Any]:
        return runner().in_caller(self.read).__await__()


class AppResponse:
    """socketify.py's response: chaining writers over a Socketify `Response` (`.response`)."""

    __slots__ = (
        "aborted_handler",
        "app",
        "body_feed",
        "client_left",
        "data_handler",
        "request",
        "response",
        "scheduled",
        "serializer",
        "status_written",
        "stream",
        "stream_opened",
        "writable_handler",
    )

    def __init__(self, response: Response, request: Request, app: App | None = None) -> None:
        self.response = response
        self.request = request
        self.app = app
        self.serializer: JsonSerializer = app.serializer if app is not None else json
        self.client_left = False
        self.aborted_handler: Callable[[AppResponse], Any] | None = None
        self.data_handler: Callable[[AppResponse, bytes, bool], Any] | None = None
        self.body_feed: asyncio.Future[Any] | None = None  # on_data's pieces, in an async handler
        self.writable_handler: Callable[[AppResponse, int], Any] | None = None
        self.status_written = False
        self.stream: ChunkStream | None = None  # a body written in pieces (try_end, send_chunk)
        self.scheduled: list[asyncio.Task[Any]] = []  # run_async tasks the answer waits for
        self.stream_opened: asyncio.Future[None] | None = None

    @property
    def aborted(self) -> bool:
        """True once the client left before a piece-by-piece answer was written (or once the
        app said so, as socketify.py's helpers do with `res.aborted = True`)."""
        stream = self.stream
        return self.client_left or (stream is not None and stream.aborted)

    @aborted.setter
    def aborted(self, value: bool) -> None:
        self.client_left = bool(value)

    # -- status, headers, cookies --------------------------------------------------------

    def write_status(self, status_or_status_text: int | str | bytes) -> AppResponse:
        """Set the status: an int (404) or a status line's text ("404 Not Found").

        The first call decides, as in uWebSockets, where the status line goes out at once:
        `res.write_status(201).send(data)` answers 201 although `send` says 200 OK.
        """
        status = status_or_status_text
        if isinstance(status, bytes | str):
            code_text = as_text(status).strip().split(" ", 1)[0]
            if not code_text.isdigit():
                raise ValueError(f"{status!r} is not a valid status")
            status = int(code_text)
        if not isinstance(status, int) or not 100 <= status <= 999:
            raise ValueError(f"{status_or_status_text!r} is not a valid status code")
        if not self.status_written:
            self.status_written = True
            self.response.status(status)
        return self

    def write_header(self, key: str | bytes, value: str | bytes | int) -> AppResponse:
        """Add a header line (a repeated name gives repeated lines, as uWebSockets does)."""
        text = str(value) if isinstance(value, int) else as_text(value)
        self.response.add_header(as_text(key), text)
        return self

    def set_cookie(self, name: str, value: str, options: dict[str, Any] | None = None) -> None:
        """Queue a Set-Cookie line; `options` as socketify.py takes them (path, max_age...)."""
        given = {key.lower().replace("-", "_"): item for key, item in (options or {}).items()}
        expires = given.pop("expires", None)
        self.response.set_cookie(
            name,
            value,
            max_age=given.pop("max_age", None),
            expires=expires if isinstance(expires, datetime | float | int | None) else None,
            path=given.pop("path", "/"),
            domain=given.pop("domain", None),
            secure=bool(given.pop("secure", False)),
            http_only=bool(given.pop("httponly", given.pop("http_only", False))),
            same_site=given.pop("samesite", given.pop("same_site", None)),
        )
        if given:
            raise ValueError(f"unknown cookie options: {', '.join(sorted(given))}")

    # -- the body --------------------------------------------------------------------------

    def write(self, message: Any) -> AppResponse:
        """Append to the body, which goes out with `end()`."""
        data, _ = _as_bytes(message, self.serializer)
        self.response.write(data)
        return self

    def end(self, message: Any = None, end_connection: bool = False) -> AppResponse:
        """End the answer with `message` (str, bytes; anything else as JSON)."""
        if end_connection:
            self.response.set_header("Connection", "close")
        if message is None:
            self.response.end()
            return self
        data, as_json = _as_bytes(message, self.serializer)
        if as_json and self.response.get_header("content-type") is None:
            self.response.set_header("Content-Type", "application/json")
        self.response.end(data)
        return self

    def send(
        self,
        message: Any = b"",
        content_type: str | bytes = b"text/plain",
        status: int | str | bytes = b"200 OK",
        headers: Iterable[tuple[str | bytes, str | bytes]] | dict[Any, Any] | None = None,
        end_connection: bool = False,
    ) -> AppResponse:
        """Status, headers and body in one call (a non-text `message` goes as JSON)."""
        self.write_status(status)
        pairs = headers.items() if isinstance(headers, dict) else headers or ()
        for name, value in pairs:
            self.write_header(name, value)
        data, as_json = _as_bytes(message, self.serializer)
        kind = "application/json" if as_json else as_text(content_type)
        if self.response.get_header("content-type") is None:
            self.response.set_header("Content-Type", kind)
        return self.end(data, end_connection)

    def cork_send(
        self,
        message: Any = b"",
        content_type: str | bytes = b"text/plain",
        status: int | str | bytes = b"200 OK",
        headers: Iterable[tuple[str | bytes, str | bytes]] | dict[Any, Any] | None = None,
        end_connection: bool = False,
    ) -> AppResponse:
        """`send()`: every answer is written in one piece already."""
        return self.send(message, content_type, status, headers, end_connection)

    def grab_aborted_handler(self) -> AppResponse:
        """Nothing to grab: a piece-by-piece answer always watches for the client leaving."""
        return self

    def end_without_body(self, end_connection: bool = False) -> AppResponse:
        """End the answer with no body."""
        return self.end(None, end_connection)

    def cork_end(self, message: Any, end_connection: bool = False) -> AppResponse:
        """`end()`: every answer is written in one piece already."""
        return self.end(message, end_connection)

    def redirect(self, location: str, status_code: int = 302) -> AppResponse:
        """Answer with a redirect to `location`."""
        self.response.redirect(location, status_code)
        return self

    def has_responded(self) -> bool:
        """True once the answer is ended."""
        return self.response.ended

    def cork(self, callback: Callable[[AppResponse], Any]) -> None:
        """Call `callback(res)` now: writes are gathered and sent in one piece anyway."""
        callback(self)

    # -- the request's body ---------------------------------------------------------------

    def on_data(self, handler: Callable[[AppResponse, bytes, bool], Any]) -> AppResponse:
        """Call `handler(res, chunk, is_last)` for the body's pieces.

        From a plain handler, the pieces come once it returns; from an `async def` one, at
        once, while it awaits (socketify.py's form helpers await a future `handler` resolves).
        """
        self.data_handler = handler
        if _inside_task():
            self.body_feed = asyncio.ensure_future(runner().in_caller(self.deliver_body))
        return self

    def deliver_body(self) -> None:
        """Feed the body to the `on_data` handler (the App calls this after the handler)."""
        handler = self.data_handler
        if handler is None:
            return
        self.data_handler = None
        for chunk in self.request.iter_body():
            handler(self, chunk, False)
        handler(self, b"", True)

    def get_data(self) -> _BodyAwaitable:
        """Await the whole body (a `BytesIO`, as socketify.py gives it)."""
        return _BodyAwaitable(lambda: BytesIO(self.request.body))

    def get_text(self, encoding: str = "utf-8") -> _BodyAwaitable:
        """Await the body as text; None when it is not valid in `encoding`."""

        def read() -> str | None:
            try:
                return self.request.body.decode(encoding)
            except UnicodeDecodeError:
                return None

        return _BodyAwaitable(read)

    def get_json(self) -> _BodyAwaitable:
        """Await the body parsed as JSON; None when it is not JSON."""

        def read() -> Any:
            try:
                return self.serializer.loads(self.request.body)
            except ValueError:
                return None

        return _BodyAwaitable(read)

    def get_form_urlencoded(self, encoding: str = "utf-8") -> _BodyAwaitable:
        """Await the urlencoded body as {name: last value}; None when it has no field."""

        def read() -> dict[str, str] | None:
            try:
                parsed = parse_qs(self.request.body.decode(encoding), keep_blank_values=True)
            except UnicodeDecodeError:
                return None
            return {name: values[-1] for name, values in parsed.items()} or None

        return _BodyAwaitable(read)

    # -- the connection --------------------------------------------------------------------

    def get_remote_address(self) -> str:
        """The client's address as text."""
        return self.request.remote_ip

    def get_remote_address_bytes(self) -> bytes:
        """The client's address, packed (4 bytes for IPv4, 16 for IPv6)."""
        try:
            return ipaddress.ip_address(self.request.remote_ip).packed
        except ValueError:
            return b""

    def get_proxied_remote_address(self) -> str:
        """The address a PROXY-protocol header or trusted proxy gave (Socketify's remote_ip)."""
        return self.request.remote_ip

    def get_proxied_remote_address_bytes(self) -> bytes:
        """`get_proxied_remote_address()`, packed."""
        return self.get_remote_address_bytes()

    def on_aborted(self, handler: Callable[[AppResponse], Any]) -> AppResponse:
        """Call `handler(res)` if the client leaves before a piece-by-piece answer is written.

        A buffered answer is written after the handler returns, all at once, so only a
        streamed one (`try_end`, `send_chunk`) can be cut short; `res.aborted` turns True.
        """
        self.aborted_handler = handler
        return self

    def run_async(self, coroutine: Any) -> Any:
        """Run `coroutine` on the worker's event loop, as part of this answer.

        From a plain handler it runs to its end here and its result is returned; from an
        `async def` one it becomes a task (returned) that the answer waits for, as
        socketify.py's answer stays open until the task ends it.
        """
        if _inside_task():
            return self.keep(asyncio.get_running_loop().create_task(coroutine))
        return runner().run(coroutine)

    def keep(self, task: asyncio.Task[Any]) -> asyncio.Task[Any]:
        """Make the answer wait for `task` (scheduled from an `async def` handler)."""
        self.scheduled.append(task)
        return task

    def close(self) -> AppResponse:
        """End the answer (if not ended) and close the connection after it."""
        self.response.set_header("Connection", "close")
        if not self.response.ended:
            self.response.end()
        return self

    # -- a body of known size, in pieces ---------------------------------------------------

    def try_end(
        self, message: str | bytes, total_size: int, end_connection: bool = False
    ) -> tuple[bool, bool]:
        """Offer the next piece of a `total_size` body: `(ok, done)`.

        Not ok means too much waits to be written: nothing of `message` was taken, and the
        `on_writable` handler is called with the write offset once the client has read.
        """
        if not isinstance(message, str | bytes):
            return False, True
        if end_connection:
            self.response.set_header("Connection", "close")
        return self.open_stream(total_size).offer(_as_bytes(message)[0])

    async def send_chunk(self, buffer: str | bytes, total_size: int) -> tuple[bool, bool]:
        """Write the next piece of a `total_size` body and wait until it is: `(ok, done)`."""
        return await self.open_stream(total_size).send(_as_bytes(buffer)[0])

    def get_write_offset(self) -> int:
        """How many bytes of a piece-by-piece body were taken so far."""
        return self.stream.offset if self.stream is not None else 0

    def write_offset(self, offset: int) -> AppResponse:
        """Set the write offset (pieces offered from elsewhere count as written)."""
        if self.stream is not None:
            self.stream.offset = offset
        return self

    def on_writable(self, handler: Callable[[AppResponse, int], Any]) -> AppResponse:
        """Call `handler(res, offset)` when the client has read what waited; it offers more."""
        self.writable_handler = handler
        return self

    def open_stream(self, total_size: int) -> ChunkStream:
        """The piece-by-piece body, made by the first try_end or send_chunk."""
        stream = self.stream
        if stream is None:
            if self.response.ended:
                raise RuntimeError("the answer has already ended")
            stream = self.stream = ChunkStream(total_size)
            opened = self.stream_opened
            if opened is not None and not opened.done():
                opened.set_result(None)
        return stream

    def streaming_started(self) -> asyncio.Future[None]:
        """A future (on the running loop) done once a piece-by-piece answer begins."""
        opened = self.stream_opened = asyncio.get_running_loop().create_future()
        if self.stream is not None:
            opened.set_result(None)
        return opened

    def finish_producing(self) -> None:
        """The handler returned: pieces still missing can only come from on_writable."""
        if self.stream is not None:
            self.stream.finish_producing()
            self.stream.wake()

    def start_stream(self) -> None:
        """Make the Socketify Response stream the pieces (the App calls this after the handler)."""
        stream = self.stream
        if stream is None or self.response.ended:
            return
        self.response.stream(stream.chunks(self.writable, self.abort), length=stream.total)
        self.response.call_on_close(self.stream_closed)

    def stream_closed(self) -> None:
        """The connection is done with the answer: if it was cut short, the client left."""
        if self.stream is not None and self.stream.stop():
            self.abort()

    def writable(self, offset: int) -> bool:
        """Call the on_writable handler, if any; True if there was one."""
        handler = self.writable_handler
        if handler is None:
            return False
        handler(self, offset)
        return True

    def abort(self) -> None:
        """The client left before the whole answer was written."""
        self.client_left = True
        handler = self.aborted_handler
        if handler is not None:
            handler(self)

    # -- socketify.py calls without a counterpart -----------------------------------------

    def get_native_handle(self, *args: Any, **kwargs: Any) -> Any:
        """Not supported."""
        raise unsupported(
            "res.get_native_handle", "there is no uWebSockets response; use res.response"
        )

    def pause(self, *args: Any, **kwargs: Any) -> Any:
        """Not supported."""
        raise unsupported("res.pause", "read the body when ready: the socket waits meanwhile")

    def resume(self, *args: Any, **kwargs: Any) -> Any:
        """Not supported."""
        raise unsupported("res.resume", "read the body when ready: the socket waits meanwhile")

    def write_continue(self) -> AppResponse:
        """Nothing to do: 100 Continue is sent when the body is first read."""
        return self

    def upgrade(
        self,
        sec_web_socket_key: str | bytes | None,
        sec_web_socket_protocol: str | bytes | None,
        sec_web_socket_extensions: str | bytes | None,
        socket_context: Any,
        user_data: Any = None,
    ) -> bool:
        """Accept the WebSocket upgrade (from a ws route's `upgrade` handler).

        The handshake is answered from the request's own headers once the `upgrade` handler
        returns; `user_data` is what `ws.get_user_data()` returns on that connection.
        """
        accept = getattr(socket_context, "accept", None)
        if accept is None:
            raise TypeError("res.upgrade takes the socket_context the upgrade handler was given")
        return bool(accept(self, user_data))

    def render(self, *args: Any, **kwargs: Any) -> AppResponse:
        """Answer with `app.template(engine)`'s `engine.render(*args, **kwargs)`, as HTML."""
        engine = self.app.template_engine if self.app is not None else None
        if engine is None:
            raise RuntimeError("res.render needs a template engine: app.template(engine)")
        self.write_header("Content-Type", "text/html")
        return self.end(engine.render(*args, **kwargs))
