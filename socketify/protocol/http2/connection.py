"""One HTTP/2 server connection, sans-IO: bytes in, events out; answers in, bytes out.

Theory of operation. The owner feeds `receive_data` what the socket received and acts on the
events it returns (`events.py`): a `RequestOpened` with a `RequestHead`, `BodyData`,
`StreamEnded`, `StreamReset`, `WindowOpened`, `PeerGoingAway`, `ConnectionTerminated`.
`frame_reader.py` cuts the received bytes into frames and whole header blocks (and keeps the
framing rules); this class handles each as a plain tuple, without an object per frame.
To answer, the owner calls `start_response`, `send_data` (which takes only what flow control
allows and says how much), `send_trailers` or `reset`, then writes whatever `data_to_send()`
returns. Nothing here blocks or raises into the owner for bad input: a client that breaks the
protocol or a limit gets its GOAWAY queued and a `ConnectionTerminated(by_peer=False)`; the
owner flushes and closes. The per-second budgets of frames that carry no request (resets,
SETTINGS, PING and the rest, `limits.py`) are charged by the framing layer as frames arrive.

Errors. A broken rule of the connection (a bad frame size, a frame on stream 0 that belongs
on a stream, an idle stream used, a header block that cannot be decoded) is a connection
error: GOAWAY with its code, and nothing is read after it. A broken rule of one stream (a
malformed request, a body that does not match its content-length, trailers that do not end
the stream, a frame on a stream that is closed) resets that stream alone; frames that were
already on their way for a stream we reset are dropped in silence.

Concurrency. A stream counts from its request until the owner calls `finished`, even when
the client reset it meanwhile (its handler may still be running). A request past
`max_concurrent_streams` of those is refused with RST_STREAM REFUSED_STREAM, which a client
retries.

Flow control. The client may send `stream_window` bytes per stream and one megabyte over the
connection before it hears from us; what the owner `consumed` is given back with one
WINDOW_UPDATE per stream and one for the connection each time the owner collects
`data_to_send()`, however many pieces it read in between.

Stopping. `goaway()` announces the last stream that will be served and keeps the connection
open for it; streams opened past it are refused. The client's GOAWAY is a `PeerGoingAway`: the
owner answers the streams open, then closes. `close()` ends the connection for good.
"""

from __future__ import annotations

from collections.abc import Iterable

import socketify.protocol.http2.frames as frames  # the module alone: the package imports us
from socketify.protocol.http.fields import HeaderField
from socketify.protocol.http.heads import RequestHead
from socketify.protocol.http2.events import (
    BodyData,
    ConnectionTerminated,
    Event,
    PeerGoingAway,
    RequestOpened,
    StreamEnded,
    StreamReset,
    WindowOpened,
)
from socketify.protocol.http2.frame_reader import FrameReader
from socketify.protocol.http2.frames import (
    END_STREAM,
    MAX_WINDOW,
    PREFACE,
    ErrorCode,
    FrameType,
    Http2Error,
    Setting,
    goaway_fields,
    priority_fields,
    settings_values,
    unpad,
    word,
)
from socketify.protocol.http2.hpack_decoder import (
    CompressionError,
    Decoder,
    HeaderList,
    HeaderListTooLarge,
)
from socketify.protocol.http2.hpack_encoder import Encoder
from socketify.protocol.http2.limits import FrameBudgets, Http2Limits
from socketify.protocol.http2.messages import (
    BadRequest,
    request_head,
    response_headers,
    trailer_fields,
)

__all__ = ["PREFACE", "Http2ServerConnection", "StreamClosed"]

NO_ERROR = int(ErrorCode.NO_ERROR)
PROTOCOL_ERROR = int(ErrorCode.PROTOCOL_ERROR)
INTERNAL_ERROR = int(ErrorCode.INTERNAL_ERROR)
FLOW_CONTROL_ERROR = int(ErrorCode.FLOW_CONTROL_ERROR)
STREAM_CLOSED = int(ErrorCode.STREAM_CLOSED)
FRAME_SIZE_ERROR = int(ErrorCode.FRAME_SIZE_ERROR)
REFUSED_STREAM = int(ErrorCode.REFUSED_STREAM)
CANCEL = int(ErrorCode.CANCEL)
COMPRESSION_ERROR = int(ErrorCode.COMPRESSION_ERROR)
ENHANCE_YOUR_CALM = int(ErrorCode.ENHANCE_YOUR_CALM)

_CONNECTION_WINDOW = 1 << 20  # unread body bytes all streams of a connection may buffer
_DEFAULT_WINDOW = 65535  # every window's size before SETTINGS say otherwise
_REMEMBERED_RESETS = 1024  # streams we reset whose late frames are dropped in silence
_CONTINUE = [(b":status", b"100")]
_CACHED_HEADS = 64  # distinct repeating requests whose heads one connection keeps
_CACHED_BLOCK = 512  # header blocks larger than this make heads that are not kept

_DATA, _HEADERS, _PRIORITY = FrameType.DATA, FrameType.HEADERS, FrameType.PRIORITY
_RST_STREAM, _SETTINGS, _PUSH_PROMISE = (
    FrameType.RST_STREAM,
    FrameType.SETTINGS,
    FrameType.PUSH_PROMISE,
)
_PING, _GOAWAY, _WINDOW_UPDATE = FrameType.PING, FrameType.GOAWAY, FrameType.WINDOW_UPDATE


class StreamClosed(Exception):
    """The stream (or the whole connection) can no longer be written: the client reset it."""


class _Stream:
    """What the connection knows of one open stream."""

    __slots__ = ("receiving", "recv_window", "send_window", "sending", "trailers", "unread")

    def __init__(self, send_window: int, recv_window: int, receiving: bool) -> None:
        self.send_window = send_window  # bytes of DATA we may still send
        self.recv_window = recv_window  # bytes of DATA the client may still send
        self.receiving = receiving  # the client has not ended its side
        self.sending = True  # we have not ended ours
        self.unread: int | None = None  # body bytes the request's content-length still owes
        self.trailers: tuple[tuple[str, str], ...] = ()


class Http2ServerConnection:
    """The HTTP/2 state of one server connection: what was received, what may be sent."""

    __slots__ = (
        "_active",
        "_budgets",
        "_credit",
        "_decoder",
        "_encoder",
        "_heads",
        "_highest",
        "_last_stream_id",
        "_out",
        "_peer_frame_size",
        "_peer_goaway",
        "_peer_window",
        "_reader",
        "_recv_window",
        "_rejected",
        "_reset_by_us",
        "_send_window",
        "_streams",
        "closed",
        "limits",
    )

    def __init__(self, limits: Http2Limits | None = None) -> None:
        limits = self.limits = limits or Http2Limits()
        self._decoder = Decoder(max_header_list_size=limits.max_header_list_size)
        self._encoder = Encoder()
        self._heads: dict[HeaderList, RequestHead] = {}  # see _request
        self._streams: dict[int, _Stream] = {}  # streams with a side still open
        self._active: set[int] = set()  # streams the owner serves (see "Concurrency")
        self._rejected: set[int] = set()  # malformed streams the owner still serves
        self._reset_by_us: set[int] = set()  # see "Errors": their late frames are dropped
        self._highest = 0  # the highest stream id the client opened
        self._last_stream_id: int | None = None  # set by goaway(): newer streams are refused
        self._peer_goaway = False
        self._budgets = FrameBudgets(limits)
        self._reader = FrameReader(limits.max_frame_size, limits.max_header_block, self._budgets)
        self._send_window = _DEFAULT_WINDOW  # connection-level DATA we may send
        self._recv_window = _CONNECTION_WINDOW  # connection-level DATA the client may send
        self._peer_window = _DEFAULT_WINDOW  # the client's SETTINGS_INITIAL_WINDOW_SIZE
        self._peer_frame_size = frames.DEFAULT_FRAME_SIZE
        self._credit: dict[int, int] = {}  # consumed bytes to give back, by stream (0: all)
        self.closed = False  # a GOAWAY ended the connection (ours after close(), or theirs)
        self._out: list[bytes | memoryview] = [
            frames.settings(
                (
                    (Setting.MAX_CONCURRENT_STREAMS, limits.max_concurrent_streams),
                    (Setting.MAX_HEADER_LIST_SIZE, limits.max_header_list_size),
                    (Setting.MAX_FRAME_SIZE, limits.max_frame_size),
                    (Setting.INITIAL_WINDOW_SIZE, limits.stream_window),
                    (Setting.ENABLE_PUSH, 0),
                )
            ),
            frames.window_update(0, _CONNECTION_WINDOW - _DEFAULT_WINDOW),
        ]

    # -- receiving ----------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        """The events in `data`, the next bytes from the client (the preface first)."""
        if self.closed:
            return []
        events: list[Event] = []
        try:
            self._receive(data, events)
        except Http2Error as exc:
            events.append(self._fail(exc.code, str(exc)))
        return events

    def _receive(self, data: bytes, events: list[Event]) -> None:
        for kind, flags, sid, payload in self._reader.frames(data):
            if kind == _HEADERS:
                self._header_block(sid, payload, bool(flags & END_STREAM), events)
            elif kind == _DATA:
                self._data(flags, sid, payload, events)
            elif kind == _WINDOW_UPDATE:
                self._window_update(sid, payload, events)
            elif kind == _SETTINGS:
                self._settings_frame(flags, sid, payload, events)
            elif kind == _PING:
                self._ping(flags, sid, payload)
            elif kind == _RST_STREAM:
                self._rst_stream(sid, payload, events)
            elif kind == _PRIORITY:
                self._priority(sid, payload)
            elif kind == _GOAWAY:
                self._goaway_frame(sid, payload, events)
            elif kind == _PUSH_PROMISE:
                raise Http2Error(PROTOCOL_ERROR, "PUSH_PROMISE from a client")
            # Frames of other types are extensions we do not speak: skipped.
            if self.closed:
                return

    # -- header blocks ------------------------------------------------------------------------

    def _decode(self, block: bytes) -> HeaderList:
        try:
            return self._decoder.decode(block)
        except CompressionError as exc:
            raise Http2Error(COMPRESSION_ERROR, str(exc)) from None
        except HeaderListTooLarge as exc:
            raise Http2Error(ENHANCE_YOUR_CALM, str(exc)) from None

    def _header_block(self, sid: int, block: bytes, ends_stream: bool, events: list[Event]) -> None:
        if not sid & 1:
            raise Http2Error(PROTOCOL_ERROR, f"stream {sid} is not a client's")
        fields = self._decode(block)  # every block, so that the table stays in step
        stream = self._streams.get(sid)
        if stream is None:
            if sid > self._highest:
                self._highest = sid
                self._request(sid, fields, ends_stream, len(block) <= _CACHED_BLOCK, events)
            elif sid not in self._reset_by_us:
                # A closed stream, or one skipped: the client may not reuse or go back.
                raise Http2Error(PROTOCOL_ERROR, f"HEADERS on stream {sid} after {self._highest}")
        elif not stream.receiving:
            self._stream_error(sid, STREAM_CLOSED, "HEADERS after the end of the request", events)
        elif not ends_stream:
            self._stream_error(sid, PROTOCOL_ERROR, "trailers without END_STREAM", events)
        else:
            try:
                stream.trailers = trailer_fields(fields)
            except BadRequest as exc:
                self._stream_error(sid, PROTOCOL_ERROR, str(exc), events)
                return
            self._remote_end(sid, stream, events)

    def _request(
        self, sid: int, fields: HeaderList, ended: bool, small: bool, events: list[Event]
    ) -> None:
        last = self._last_stream_id
        if (last is not None and sid > last) or (
            len(self._active) >= self.limits.max_concurrent_streams
        ):
            self._refuse_opening(sid, REFUSED_STREAM)
            return
        # PERF: a client repeats its requests' header lists (the decoder hands back the same
        # list for a repeated block); a head is an immutable value, so the one made for the
        # first serves the repeats, as the HTTP/1.1 parser's head cache does.
        heads = self._heads
        head = heads.get(fields)
        if head is None:
            try:
                head = request_head(fields)
            except BadRequest:
                self._refuse_opening(sid, PROTOCOL_ERROR)
                return
            if small:
                if len(heads) >= _CACHED_HEADS:
                    heads.clear()
                heads[fields] = head
        if ended and head.content_length:
            self._refuse_opening(sid, PROTOCOL_ERROR)  # a body announced, none sent
            return
        stream = _Stream(self._peer_window, self.limits.stream_window, not ended)
        stream.unread = head.content_length
        self._streams[sid] = stream
        self._active.add(sid)
        events.append(RequestOpened(sid, head, ended))

    # -- DATA and flow control ----------------------------------------------------------------

    def _data(self, flags: int, sid: int, payload: bytes, events: list[Event]) -> None:
        if not sid:
            raise Http2Error(PROTOCOL_ERROR, "DATA on stream 0")
        length = len(payload)  # padding included: flow control counts it
        data = unpad(flags, payload)
        self._recv_window -= length
        if self._recv_window < 0:
            raise Http2Error(FLOW_CONTROL_ERROR, "DATA past the connection window")
        stream = self._streams.get(sid)
        if stream is None or not stream.receiving:
            if stream is None and sid > self._highest:
                raise Http2Error(PROTOCOL_ERROR, f"DATA on idle stream {sid}")
            self._give_back(0, length)
            if sid not in self._reset_by_us:
                self._stream_error(sid, STREAM_CLOSED, "DATA after the end of the request", events)
            return
        stream.recv_window -= length
        if stream.recv_window < 0:
            self._give_back(0, length)
            self._stream_error(sid, FLOW_CONTROL_ERROR, "DATA past the stream window", events)
            return
        if stream.unread is not None:
            stream.unread -= len(data)
            if stream.unread < 0:
                self._give_back(0, length)
                self._stream_error(
                    sid, PROTOCOL_ERROR, "body longer than its content-length", events
                )
                return
        if sid in self._active and sid not in self._rejected:
            events.append(BodyData(sid, data, length))
        elif length:
            self.consumed(sid, length)  # no one reads it: give it back
        if flags & END_STREAM:
            self._remote_end(sid, stream, events)

    def _remote_end(self, sid: int, stream: _Stream, events: list[Event]) -> None:
        """The client ended its side of the stream."""
        stream.receiving = False
        if stream.unread:
            self._stream_error(sid, PROTOCOL_ERROR, "body shorter than its content-length", events)
            return
        if not stream.sending:
            del self._streams[sid]
        if sid in self._active and sid not in self._rejected:
            events.append(StreamEnded(sid, stream.trailers))

    def _window_update(self, sid: int, payload: bytes, events: list[Event]) -> None:
        increment = word(payload, "WINDOW_UPDATE") & 0x7FFFFFFF
        if not sid:
            if not increment:
                raise Http2Error(PROTOCOL_ERROR, "a connection WINDOW_UPDATE of 0")
            self._send_window += increment
            if self._send_window > MAX_WINDOW:
                raise Http2Error(FLOW_CONTROL_ERROR, "connection window over 2^31-1")
            events.append(WindowOpened(0))
            return
        stream = self._streams.get(sid)
        if stream is None:
            if sid > self._highest:
                raise Http2Error(PROTOCOL_ERROR, f"WINDOW_UPDATE on idle stream {sid}")
            return  # a stream that just closed: nothing more to send on it
        if not increment:
            self._stream_error(sid, PROTOCOL_ERROR, "a stream WINDOW_UPDATE of 0", events)
            return
        stream.send_window += increment
        if stream.send_window > MAX_WINDOW:
            self._stream_error(sid, FLOW_CONTROL_ERROR, "stream window over 2^31-1", events)
            return
        events.append(WindowOpened(sid))

    def _give_back(self, sid: int, length: int) -> None:
        """Grant the client `length` more bytes at the next `data_to_send` (sid 0: all)."""
        if length:
            credit = self._credit
            credit[sid] = credit.get(sid, 0) + length

    # -- control frames -----------------------------------------------------------------------

    def _settings_frame(self, flags: int, sid: int, payload: bytes, events: list[Event]) -> None:
        if sid:
            raise Http2Error(PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & frames.ACK:
            if payload:
                raise Http2Error(FRAME_SIZE_ERROR, "a SETTINGS acknowledgement with a payload")
            return
        values = settings_values(payload)  # its budget was charged by the FrameReader
        window_changed = False
        for key, value in values:
            if key == Setting.INITIAL_WINDOW_SIZE:
                if value > MAX_WINDOW:
                    raise Http2Error(FLOW_CONTROL_ERROR, "an initial window over 2^31-1")
                delta = value - self._peer_window
                self._peer_window = value
                for stream in self._streams.values():
                    stream.send_window += delta
                    if stream.send_window > MAX_WINDOW:
                        raise Http2Error(FLOW_CONTROL_ERROR, "a stream window over 2^31-1")
                window_changed = True
            elif key == Setting.MAX_FRAME_SIZE:
                if not frames.DEFAULT_FRAME_SIZE <= value <= frames.MAX_FRAME_SIZE:
                    raise Http2Error(PROTOCOL_ERROR, f"SETTINGS_MAX_FRAME_SIZE {value}")
                self._peer_frame_size = value
            elif key == Setting.HEADER_TABLE_SIZE:
                self._encoder.set_table_size(value)
            elif key == Setting.ENABLE_PUSH and value > 1:
                raise Http2Error(PROTOCOL_ERROR, f"SETTINGS_ENABLE_PUSH {value}")
        self._out.append(frames.settings_ack())
        if window_changed:
            events.append(WindowOpened(0))

    def _ping(self, flags: int, sid: int, payload: bytes) -> None:
        if sid:
            raise Http2Error(PROTOCOL_ERROR, "PING on a stream")
        if len(payload) != 8:
            raise Http2Error(FRAME_SIZE_ERROR, "PING of the wrong length")
        if flags & frames.ACK:
            return
        self._out.append(frames.ping_ack(payload))

    def _rst_stream(self, sid: int, payload: bytes, events: list[Event]) -> None:
        code = word(payload, "RST_STREAM")
        if not sid or sid > self._highest:
            raise Http2Error(PROTOCOL_ERROR, f"RST_STREAM on idle stream {sid}")
        self._streams.pop(sid, None)
        if sid in self._active and sid not in self._rejected:
            events.append(StreamReset(sid, code, True))

    def _priority(self, sid: int, payload: bytes) -> None:
        """PRIORITY is checked and ignored: the server answers streams as they come."""
        if not sid:
            raise Http2Error(PROTOCOL_ERROR, "PRIORITY on stream 0")
        if priority_fields(payload)[1] == sid:
            raise Http2Error(PROTOCOL_ERROR, f"stream {sid} depends on itself")

    def _goaway_frame(self, sid: int, payload: bytes, events: list[Event]) -> None:
        if sid:
            raise Http2Error(PROTOCOL_ERROR, "GOAWAY on a stream")
        goaway_fields(payload)  # its fields say nothing a server needs; only its length is checked
        if not self._peer_goaway:
            self._peer_goaway = True
            events.append(PeerGoingAway())

    # -- errors -------------------------------------------------------------------------------

    def _stream_error(self, sid: int, code: int, detail: str, events: list[Event]) -> None:
        """Reset one stream for a broken rule; its handler, if it runs, hears it is gone."""
        self.reset(sid, code)
        if sid not in self._streams and sid not in self._reset_by_us:
            self._refuse(sid, code)  # closed already: the RST_STREAM still answers
        if sid in self._active and sid not in self._rejected:
            self._rejected.add(sid)
            events.append(StreamReset(sid, code, by_peer=False))

    def _refuse_opening(self, sid: int, code: int) -> None:
        """Refuse a stream as it opens, within the budget of refusals (see limits.py)."""
        flood = self._budgets.refuse()
        if flood is not None:
            raise Http2Error(ENHANCE_YOUR_CALM, flood)
        self._refuse(sid, code)

    def _refuse(self, sid: int, code: int) -> None:
        """RST_STREAM for a stream that was never (or is no longer) open."""
        self._out.append(frames.rst_stream(sid, code))
        self._forget(sid)

    def _forget(self, sid: int) -> None:
        """Remember a stream we reset, so that its late frames are dropped in silence."""
        reset = self._reset_by_us
        if len(reset) >= _REMEMBERED_RESETS:
            reset.clear()
        reset.add(sid)

    def _fail(self, code: int, detail: str) -> ConnectionTerminated:
        """End the connection for a client that broke a rule; the GOAWAY goes out next."""
        last = self._highest
        self.close(code)
        return ConnectionTerminated(code, last, False, detail)

    # -- sending ------------------------------------------------------------------------------

    def _open_for_sending(self, stream_id: int) -> _Stream:
        if self.closed:
            raise StreamClosed(stream_id)
        stream = self._streams.get(stream_id)
        if stream is None or not stream.sending:
            raise StreamClosed(stream_id)
        return stream

    def _local_end(self, stream_id: int, stream: _Stream) -> None:
        stream.sending = False
        if not stream.receiving:
            del self._streams[stream_id]

    def start_response(
        self,
        stream_id: int,
        status: int,
        fields: Iterable[HeaderField],
        *,
        length: int | None = None,
        end_stream: bool = False,
    ) -> None:
        """Queue the HEADERS of an answer; `end_stream` when no body follows (HEAD, 204...)."""
        stream = self._open_for_sending(stream_id)
        block = self._encoder.encode(response_headers(status, fields, length))
        self._out.append(frames.headers(stream_id, block, end_stream, self._peer_frame_size))
        if end_stream:
            self._local_end(stream_id, stream)

    def window(self, stream_id: int) -> int:
        """Bytes of body `send_data` would take now for `stream_id` (flow control)."""
        stream = self._open_for_sending(stream_id)
        return min(stream.send_window, self._send_window)

    def send_data(self, stream_id: int, data: bytes | memoryview, end_stream: bool = False) -> int:
        """Queue as much of `data` as flow control allows now; returns how much that was.

        END_STREAM goes with the last byte, and only once all of `data` was taken. The frames
        carry slices of `data` itself when it is immutable (`bytes`, or a view of them); a
        buffer its owner may change before the frames are written is copied.
        """
        stream = self._open_for_sending(stream_id)
        if type(data) is not bytes and not isinstance(memoryview(data).obj, bytes):
            data = bytes(data)
        size = len(data)
        # A window can be below zero (a smaller SETTINGS_INITIAL_WINDOW_SIZE): nothing goes.
        allowed = max(0, min(size, stream.send_window, self._send_window)) if size else 0
        if allowed < size:
            end_stream = False
        out = self._out
        step = self._peer_frame_size
        if allowed <= step:
            if allowed or end_stream:
                out.append(frames.data_header(stream_id, allowed, end_stream))
                if allowed:
                    out.append(data if allowed == size else data[:allowed])
                    self._budgets.earn(1)  # the client may acknowledge it (see limits.py)
        else:
            view = memoryview(data)
            sent = 0
            while sent < allowed:
                n = min(step, allowed - sent)
                last = end_stream and sent + n == size
                out.append(frames.data_header(stream_id, n, last))
                out.append(view[sent : sent + n])
                sent += n
            self._budgets.earn(-(-allowed // step))
        stream.send_window -= allowed
        self._send_window -= allowed
        if end_stream:
            self._local_end(stream_id, stream)
        return allowed

    def send_trailers(self, stream_id: int, fields: Iterable[tuple[str, str]]) -> None:
        """Queue trailer fields, which end the stream."""
        stream = self._open_for_sending(stream_id)
        block = self._encoder.encode(
            [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in fields]
        )
        self._out.append(frames.headers(stream_id, block, True, self._peer_frame_size))
        self._local_end(stream_id, stream)

    def informational_100(self, stream_id: int) -> None:
        """Queue `100 Continue`: the client may send the body it is holding back."""
        self._open_for_sending(stream_id)
        block = self._encoder.encode(_CONTINUE)
        self._out.append(frames.headers(stream_id, block, False, self._peer_frame_size))

    def consumed(self, stream_id: int, length: int) -> None:
        """The owner read `length` flow-controlled bytes: let the client send as much more."""
        if length and not self.closed:
            credit = self._credit
            credit[0] = credit.get(0, 0) + length
            credit[stream_id] = credit.get(stream_id, 0) + length

    def reset(self, stream_id: int, code: int = INTERNAL_ERROR) -> None:
        """Queue RST_STREAM for a stream, unless it is closed already."""
        stream = self._streams.pop(stream_id, None)
        if stream is None or self.closed:
            return
        self._refuse(stream_id, code)

    def finished(self, stream_id: int, drain: bool = False) -> None:
        """The owner is done with a stream; a client still sending its body is told to stop,
        unless `drain`: the rest is then taken (and dropped) as it comes, a cheaper end than
        a reset for a short rest, and one that every client handles."""
        self._active.discard(stream_id)
        self._rejected.discard(stream_id)
        stream = self._streams.get(stream_id)
        if drain and len(self._streams) - len(self._active) > self.limits.max_concurrent_streams:
            # Drained streams no longer count as served: a client that never ends them
            # must not make the connection keep them all.
            drain = False
        if stream is not None and stream.receiving and not drain:
            # The answer is complete, so the rest of the request is not wanted: NO_ERROR.
            self.reset(stream_id, NO_ERROR)

    @property
    def open_streams(self) -> int:
        """Streams the owner is still serving."""
        return len(self._active)

    @property
    def last_stream_id(self) -> int:
        """The highest stream id the client opened."""
        return self._highest

    def goaway(self, code: int = NO_ERROR) -> None:
        """Announce the end: streams opened so far are served, newer ones refused."""
        if self.closed or self._last_stream_id is not None:
            return
        last = self._last_stream_id = self._highest
        self._out.append(frames.goaway(last, code))

    def close(self, code: int = NO_ERROR) -> None:
        """Queue the final GOAWAY; nothing is sent or received after it."""
        if self.closed:
            return
        self.closed = True
        last = self._last_stream_id
        if last is None:
            last = self._highest
        self._out.append(frames.goaway(last, code))

    def data_to_send(self) -> bytes:
        """The bytes to write now (and forget)."""
        return b"".join(self.buffers_to_send())

    def buffers_to_send(self) -> list[bytes | memoryview]:
        """What `data_to_send` would join, as the frames and body slices it is made of.

        For a vectored write (`socket.sendmsg`): a body goes from the caller's buffer to the
        kernel without being copied into one string first.
        """
        out = self._out
        if self._credit:
            self._grant(out)
        self._out = []
        return out

    def _grant(self, out: list[bytes | memoryview]) -> None:
        """One WINDOW_UPDATE per stream, and one for the connection, for what was consumed."""
        credit = self._credit
        if not self.closed:
            for sid, length in credit.items():
                if not sid:
                    self._recv_window += length
                    out.append(frames.window_update(0, length))
                    continue
                stream = self._streams.get(sid)
                if stream is not None and stream.receiving:
                    stream.recv_window += length
                    out.append(frames.window_update(sid, length))
        credit.clear()
