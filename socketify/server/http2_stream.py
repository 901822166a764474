"""One HTTP/2 stream: its request through the app in its own greenlet, its answer as frames.

Theory of operation. The session's reader routes the stream's events here (`body_data`,
`body_ended`, `gone`, `window_opened`); the stream's greenlet (`run`) builds the same `Request`
and `Response` an HTTP/1.1 exchange does, runs `Application.handle`, and writes the answer
through the `Response`'s public surface. The greenlet is the only one that waits for this
stream: for body bytes (the body is read only when the app asks, and each piece read is
acknowledged with WINDOW_UPDATE, so what waits unread is bounded by the stream's window;
`body_timeout` bounds the time spent waiting for them across all the app's reads, as on
HTTP/1.1: a body that runs out of it gets a 408, then a reset for the rest), for
send window (a zero window parks the sender, at most `http2_send_timeout`, then RST_STREAM),
and for the socket's backlog to drain; before its handler runs, it waits while the connection
holds too much for a client that reads nothing (`Http2Session.wait_for_room`).

An answer is buffered bytes, a file range (read and sent in chunks: sendfile cannot go
through frames), a stream sent as produced (its trailer fields, if it set any, in a last
HEADERS frame), or an upgrade. A failure after the HEADERS went out
resets the stream with INTERNAL_ERROR, so the client cannot take a cut answer for a whole one.
An SSE upgrade gets an `http2_channel.StreamChannel`, so an event stream is a long-lived
HTTP/2 stream with the same bounded backlog; a WebSocket needs the HTTP/1.1 upgrade and gets
a 505 here.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import gevent
from gevent import GreenletExit
from gevent.event import Event

from socketify.core.body_stream import PAYLOAD_TOO_LARGE, BodyStream
from socketify.core.errors import HTTPError
from socketify.core.request import Request
from socketify.core.response import Response
from socketify.protocol.http2 import CANCEL, INTERNAL_ERROR, StreamClosed
from socketify.protocol.http11 import RequestHead, header_field
from socketify.server.http2_channel import StreamChannel
from socketify.server.request_body import DRAIN_BUDGET

if TYPE_CHECKING:
    from socketify.server.http2 import Http2Session

__all__ = ["Stream"]

log = logging.getLogger("socketify.error")

SEND_CHUNK = 1 << 18  # body bytes framed per flush (see send_all)
FILE_CHUNK = SEND_CHUNK
_TEXT = header_field("Content-Type", "text/plain; charset=utf-8")


class Stream:
    """The request and answer of one HTTP/2 stream."""

    __slots__ = (
        "_body_time",
        "_chunks",
        "_continued",
        "_ended",
        "_gone",
        "_input_closed",
        "_received",
        "_signal",
        "_too_large",
        "_trailers",
        "_unread_flow",
        "done",
        "greenlet",
        "head",
        "proto",
        "session",
        "stream_id",
    )

    def __init__(
        self, session: Http2Session, stream_id: int, head: RequestHead, ended: bool
    ) -> None:
        self.session = session
        self.proto = session.proto
        self.stream_id = stream_id
        self.head = head
        self.greenlet: Any = None
        self.done = False  # the handler has answered: body bytes are no longer wanted
        self._ended = ended  # the client sent the whole body
        self._gone = False  # the client reset the stream (or the connection ended)
        self._input_closed = False  # an upgraded stream was shut down by its owner
        self._continued = False  # 100 Continue went out
        self._chunks: deque[tuple[bytes, int]] = deque()  # (piece, flow-controlled length)
        self._unread_flow = 0  # flow-controlled bytes buffered and not acknowledged
        self._received = 0
        self._too_large = False
        self._trailers: tuple[tuple[str, str], ...] = ()  # what the client sent after the body
        # Seconds left of waiting for the body; below zero once it timed out.
        self._body_time = session.options.body_timeout
        self._signal = Event()  # set on anything this stream's greenlet may wait for

    # -- the reader's side --------------------------------------------------------------------

    def body_data(self, data: bytes, flow_length: int) -> None:
        """Body bytes arrived; buffered until the app reads them."""
        if self.done or self._too_large:
            self.proto.consumed(self.stream_id, flow_length)
            return
        self._received += len(data)
        if self._received > self.session.options.max_body_size:
            self._too_large = True
            self.proto.consumed(self.stream_id, flow_length + self._unread_flow)
            self._unread_flow = 0
            self._chunks.clear()
        else:
            self._chunks.append((data, flow_length))
            self._unread_flow += flow_length
        self._signal.set()

    def body_ended(self, trailers: tuple[tuple[str, str], ...] = ()) -> None:
        """The client sent the end of the request, with these trailer fields."""
        self._ended = True
        self._trailers = trailers
        self._signal.set()

    def gone(self) -> None:
        """The client reset the stream: reads and writes end."""
        self._gone = True
        self._signal.set()

    def window_opened(self) -> None:
        """The client granted send window."""
        self._signal.set()

    # -- the stream's greenlet ----------------------------------------------------------------

    def run(self) -> None:
        """Answer the request; runs in this stream's own greenlet."""
        session = self.session
        opts = session.options
        conn = session.conn
        res: Response | None = None
        try:
            head = self.head
            if head.content_length is not None and head.content_length > opts.max_body_size:
                self._answer_plain(413, PAYLOAD_TOO_LARGE)
                return
            no_body = self._ended and head.content_length is None
            no_body = no_body and not self._chunks and not self._trailers
            body = b"" if no_body else _Body(self)
            req = Request(head, body, conn.addr, opts.trust_proxy, conn.origin_scheme)
            if conn.peer_cert is not None:
                req.client_cert = conn.peer_cert
            if conn.proxy_header is not None:
                req.proxy_header = conn.proxy_header
            req.server_name = conn.server_name
            res = Response(req)
            session.wait_for_room()  # a client that reads nothing gets no more answers made
            try:
                if opts.request_timeout:
                    with gevent.Timeout(opts.request_timeout):
                        session.conn.service.app.handle(req, res)
                else:
                    session.conn.service.app.handle(req, res)
            except GreenletExit:
                raise
            except gevent.Timeout:
                log.error("request %s %s exceeded request_timeout", head.method, head.target)
                self._answer_plain(503, "Request timed out")
                return
            except BaseException:
                # See the HTTP/1.1 connection: whatever escapes the app's own mapping must
                # not reach the hub.
                log.exception("request %s %s failed", head.method, head.target)
                self._answer_plain(500, "Internal Server Error")
                return
            self.done = True
            self._write(res)
        except (StreamClosed, GreenletExit):
            pass
        except BaseException:
            log.exception("HTTP/2 answer on stream %d failed", self.stream_id)
            self.proto.reset(self.stream_id, INTERNAL_ERROR)
        finally:
            self.done = True
            if res is not None:
                res.close()  # its close callbacks run whatever happened: answered, failed, reset
            if self._unread_flow:
                self.proto.consumed(self.stream_id, self._unread_flow)
                self._unread_flow = 0
            session.stream_done(self)

    def next_piece(self) -> bytes:
        """The next body piece, waiting for the client if needed; b"" at the end."""
        if self.done:
            # As on HTTP/1.1: the pieces that come once the answer is being written are
            # dropped (see body_data), so a read then would miss them.
            raise RuntimeError("the request was answered; its body can no longer be read")
        chunks = self._chunks
        while True:
            if chunks:
                data, flow = chunks.popleft()
                self._unread_flow -= flow
                self.proto.consumed(self.stream_id, flow)
                self.session.schedule_flush()
                if data:
                    return data
                continue
            if self._too_large:
                raise HTTPError(413, PAYLOAD_TOO_LARGE)
            if self._ended:
                return b""
            if self._gone:
                raise HTTPError(400, "the client reset the stream")
            if self.head.expect_continue and not self._continued:
                self._continued = True
                try:
                    self.proto.informational_100(self.stream_id)
                except StreamClosed:
                    raise HTTPError(400, "the client reset the stream") from None
                self.session.schedule_flush()
            self._wait_for_body()

    def _wait_for_body(self) -> None:
        """Park until the reader signals, within what is left of the body's deadline.

        The deadline is one budget for the whole body, as on HTTP/1.1: only the time spent
        waiting for the client counts, not the app's own work between reads. Once it is
        spent the app gets a 408, and the rest of the body is refused with a reset.
        """
        left = self._body_time
        started = time.monotonic()
        signalled = left > 0 and self._wait(left)
        self._body_time = left - (time.monotonic() - started)
        if not signalled:
            self._body_time = -1.0
            raise HTTPError(408, "Request body timed out")

    @property
    def trailers(self) -> tuple[tuple[str, str], ...]:
        """The trailer fields the client sent after the body (once it ended)."""
        return self._trailers

    @property
    def unread_is_small(self) -> bool:
        """Whether what the client has yet to send is within the drain budget (see
        `server.request_body`): taken and dropped rather than refused with a reset."""
        expected = self.head.content_length
        if self._body_time < 0:
            return False  # a client too slow for body_timeout is not waited for again
        return expected is not None and expected - self._received <= DRAIN_BUDGET

    def _wait(self, timeout: float | None) -> bool:
        """Park until the reader signals this stream; False on timeout."""
        signal = self._signal
        signal.clear()
        return signal.wait(timeout)

    # -- writing the answer -------------------------------------------------------------------

    def _write(self, res: Response) -> None:
        proto, sid = self.proto, self.stream_id
        if res.upgrade is not None:
            self._upgrade(res)
            return
        if res.file_path is None and res.stream_iter is None:
            body = res.body
            sends = res.sends_body and bool(body)
            proto.start_response(
                sid, res.status_code, res.fields(), length=len(body), end_stream=not sends
            )
            if sends:
                self.send_all(body, end=True)
            else:
                self.session.schedule_flush()
            return
        length = res.body_length
        if not res.sends_body:
            proto.start_response(sid, res.status_code, res.fields(), length=length, end_stream=True)
            self.session.schedule_flush()
            return
        proto.start_response(sid, res.status_code, res.fields(), length=length)
        if res.file_path is not None:
            self._send_file(res.file_path, res.file_offset, res.file_length)
        else:
            for chunk in res.iter_stream():
                if chunk:
                    self.send_all(chunk)
            trailers = res.trailer_fields()  # only now: the iterable may have set them
            if trailers:
                proto.send_trailers(sid, [(field[0], field[2]) for field in trailers])
                self.session.schedule_flush()
            else:
                self.send_all(b"", end=True)

    def _send_file(self, path: str, offset: int, length: int) -> None:
        with open(path, "rb") as file:
            file.seek(offset)
            remaining = length
            while remaining:
                chunk = file.read(min(FILE_CHUNK, remaining))
                if not chunk:
                    raise OSError(f"{path} is shorter than the answer said")
                remaining -= len(chunk)
                self.send_all(chunk, end=not remaining)
        if not length:
            self.send_all(b"", end=True)

    def _answer_plain(self, status: int, text: str) -> None:
        body = f"{text}\n".encode()
        self.proto.start_response(self.stream_id, status, (_TEXT,), length=len(body))
        self.send_all(body, end=True)

    def send_all(self, data: bytes | memoryview, end: bool = False) -> None:
        """Send `data` on this stream, waiting for window and for the socket as needed.

        Raises StreamClosed when the client reset the stream, or when it granted no window
        (or read nothing) for `http2_send_timeout`; the stream is then reset.
        """
        session = self.session
        held = len(data)
        session.hold(held)
        try:
            self._send_all(data, end)
        finally:
            session.release(held)

    def _send_all(self, data: bytes | memoryview, end: bool) -> None:
        session = self.session
        proto, sid = self.proto, self.stream_id
        timeout = session.options.http2_send_timeout
        rest = memoryview(data) if len(data) > SEND_CHUNK else data
        while True:
            piece = rest[:SEND_CHUNK]
            sent = proto.send_data(sid, piece, end and len(piece) == len(rest))
            if sent == SEND_CHUNK:
                # A full chunk goes to the socket now, not at the end of the loop turn: the
                # protocol would otherwise hold a large body's frames until then, and the
                # backlog bound below would see them only once all was framed.
                session.flush()
            else:
                session.schedule_flush()
            if not session.wait_drained(timeout):
                self._stalled()
            if sent == len(rest):
                return
            rest = rest[sent:]
            while proto.window(sid) <= 0:
                if self._gone:
                    raise StreamClosed(sid)
                if not self._wait(timeout):
                    self._stalled()

    def _stalled(self) -> None:
        log.info("HTTP/2 stream %d: the client took nothing for a while; reset", self.stream_id)
        self.proto.reset(self.stream_id, CANCEL)
        self.session.schedule_flush()
        raise StreamClosed(self.stream_id)

    def _upgrade(self, res: Response) -> None:
        proto, sid = self.proto, self.stream_id
        if res.status_code == 101:
            self._answer_plain(505, "WebSocket needs an HTTP/1.1 connection")
            return
        if not res.sends_body:
            proto.start_response(sid, res.status_code, res.fields(), end_stream=True)
            self.session.schedule_flush()
            return
        proto.start_response(sid, res.status_code, res.fields())
        self.session.schedule_flush()
        assert res.upgrade is not None
        res.upgrade(StreamChannel(self))
        if not self._gone:
            self.send_all(b"", end=True)

    # -- what an upgraded stream's owner uses (see StreamChannel) -----------------------------

    def offer(self, data: bytes | memoryview) -> int:
        """Queue what flow control and the socket's backlog allow now, without waiting."""
        if self._gone or self._input_closed:
            raise BrokenPipeError
        room = self.session.room
        if room <= 0:
            raise BlockingIOError
        try:
            sent = self.proto.send_data(self.stream_id, data[:room], False)
        except StreamClosed:
            raise BrokenPipeError from None
        self.session.schedule_flush()
        if not sent and data:
            raise BlockingIOError
        return sent

    @property
    def input_closed(self) -> bool:
        """The stream is over for its upgraded owner: reset, or shut down."""
        return self._gone or self._input_closed

    def wait_input(self) -> None:
        """Park until the stream is over for its upgraded owner."""
        while not self.input_closed:
            self._wait(None)

    def shut_down(self) -> None:
        """The upgraded owner ends the stream; its reader wakes up to the end."""
        self._input_closed = True
        self._signal.set()


class _Body(BodyStream):
    """A request body read from its stream's buffer as the app asks."""

    __slots__ = ("_stream",)

    def __init__(self, stream: Stream) -> None:
        super().__init__(expected=stream.head.content_length)
        self._stream = stream

    def next_piece(self) -> bytes:
        """The next piece; b"" at the end (the trailers are then known)."""
        piece = self._stream.next_piece()
        if not piece:
            self.trailers = self._stream.trailers
        return piece
