"""One HTTP/2 server connection, sans-IO, on h2: bytes in, events out; answers in, bytes out.

Theory of operation. `Http2ServerConnection` wraps an `h2.connection.H2Connection` and speaks
to its owner in the server's own terms. The owner feeds it what the socket received and acts
on the events it returns (`events.py`): a `RequestOpened` with a `RequestHead`, `BodyData`,
`StreamEnded`, `StreamReset`, `WindowOpened`, `PeerGoingAway`, `ConnectionTerminated`. Before
h2 sees the bytes, `frame_headers.py` checks the frame headers. To answer, the owner calls
`start_response`, `send_data` (which takes only what flow control allows and says how much),
`send_trailers` or `reset`, then writes whatever `data_to_send()` returns. Nothing here
blocks or raises into the owner for bad input: a client that breaks the protocol or a limit
gets its GOAWAY queued and a `ConnectionTerminated(by_peer=False)`; the owner flushes and
closes.

Concurrency. The connection tracks the streams the owner is still serving: a stream counts
from its request until the owner calls `finished`, even when the client reset it meanwhile
(its handler may still be running). A request past `max_concurrent_streams` of those is
refused with RST_STREAM REFUSED_STREAM, which a client retries. h2 enforces the advertised
limit itself by failing the whole connection, so it is given a looser ceiling and the
advertised limit is ours to keep.

Malformed requests. h2's own header checks are off: they fail the whole connection, where a
malformed request (RFC 9113 §8.1.1) is an error of its stream alone. `messages.py` checks the
header list and the trailers, and this class checks that a body matches its content-length
(h2 never sees that field, see `hpack_decoder.py`); a malformed stream is reset with
PROTOCOL_ERROR, and its owner, if it already serves it, gets a `StreamReset`.

Stopping. h2 treats a GOAWAY it sent as the end of everything: after it, no frame may be sent
or received, so in-flight streams could not finish. `goaway()` therefore writes the GOAWAY
frame itself and keeps the h2 state open; streams the client opens past the announced last
stream id are refused. `close()` ends the connection for good. For the same reason h2 never
sees the client's GOAWAY (`frame_headers.py` hides it): the owner gets a `PeerGoingAway`,
answers the streams open, then closes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
from h2.errors import ErrorCodes
from hyperframe.frame import GoAwayFrame

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
from socketify.protocol.http2.frame_headers import PREFACE, FrameRefused, FrameScanner
from socketify.protocol.http2.hpack_decoder import ServerDecoder
from socketify.protocol.http2.limits import FrameBudgets, Http2Limits
from socketify.protocol.http2.messages import (
    BadRequest,
    request_head,
    response_headers,
    trailer_fields,
)
from socketify.protocol.http11.serializer import HeaderField

__all__ = ["PREFACE", "Http2ServerConnection", "StreamClosed"]

NO_ERROR = int(ErrorCodes.NO_ERROR)
PROTOCOL_ERROR = int(ErrorCodes.PROTOCOL_ERROR)
INTERNAL_ERROR = int(ErrorCodes.INTERNAL_ERROR)
REFUSED_STREAM = int(ErrorCodes.REFUSED_STREAM)
CANCEL = int(ErrorCodes.CANCEL)
ENHANCE_YOUR_CALM = int(ErrorCodes.ENHANCE_YOUR_CALM)
_CONNECTION_WINDOW = 1 << 20  # unread body bytes all streams of a connection may buffer
_CONTINUE = [(b":status", b"100")]

_Settings = h2.settings.SettingCodes


class StreamClosed(Exception):
    """The stream (or the whole connection) can no longer be written: the client reset it."""


class Http2ServerConnection:
    """The HTTP/2 state of one server connection: what was received, what may be sent."""

    __slots__ = (
        "_active",
        "_budgets",
        "_h2",
        "_last_stream_id",
        "_out",
        "_peer_goaway",
        "_receiving",
        "_rejected",
        "_scanner",
        "_trailers",
        "_unread",
        "closed",
        "limits",
    )

    def __init__(self, limits: Http2Limits | None = None) -> None:
        limits = self.limits = limits or Http2Limits()
        config = h2.config.H2Configuration(
            client_side=False,
            header_encoding=None,
            # Our fields are checked when the Response makes them, and their names are
            # lower-cased already: h2's second pass over every answer would cost, not guard.
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
            # h2 fails the whole connection for a malformed request; messages.py checks each
            # request in one pass and resets only its stream (see "Malformed requests").
            validate_inbound_headers=False,
            normalize_inbound_headers=False,
        )
        conn = self._h2 = h2.connection.H2Connection(config)
        conn.decoder = ServerDecoder()
        advertised = {
            _Settings.MAX_CONCURRENT_STREAMS: limits.max_concurrent_streams,
            _Settings.MAX_HEADER_LIST_SIZE: limits.max_header_list_size,
            _Settings.MAX_FRAME_SIZE: limits.max_frame_size,
            _Settings.INITIAL_WINDOW_SIZE: limits.stream_window,
            _Settings.ENABLE_PUSH: 0,
        }
        conn.local_settings = h2.settings.Settings(client=False, initial_values=advertised)
        conn.initiate_connection()
        # See "Concurrency" above: h2 may allow more than we advertised; we refuse the rest.
        ceiling = max(2 * limits.max_concurrent_streams, limits.max_concurrent_streams + 100)
        conn.local_settings = h2.settings.Settings(
            client=False, initial_values={**advertised, _Settings.MAX_CONCURRENT_STREAMS: ceiling}
        )
        # h2 applies these when the client acknowledges our SETTINGS; its first requests
        # come before that and must meet the same bounds.
        conn.max_inbound_frame_size = limits.max_frame_size
        conn.decoder.max_header_list_size = limits.max_header_list_size
        conn.increment_flow_control_window(_CONNECTION_WINDOW - 65535)
        self._budgets = FrameBudgets(limits)
        self._scanner = FrameScanner(limits.max_frame_size, limits.max_header_block, self._budgets)
        self._active: set[int] = set()  # streams the owner serves (see "Concurrency")
        self._receiving: set[int] = set()  # streams whose client side is still open
        self._trailers: dict[int, tuple[tuple[str, str], ...]] = {}
        self._unread: dict[int, int] = {}  # body bytes a request's content-length still owes
        self._rejected: set[int] = set()  # malformed streams the owner still serves
        self._last_stream_id: int | None = None  # set by goaway(): newer streams are refused
        self._peer_goaway = False  # reported the client's GOAWAY
        self._out = bytearray()  # frames of ours that must precede h2's next output
        self.closed = False  # a GOAWAY ended the connection (ours after close(), or theirs)

    # -- receiving ----------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        """The events in `data`, the next bytes from the client (the preface first)."""
        if self.closed:
            return []
        scanner = self._scanner
        try:
            h2_events = self._h2.receive_data(scanner.feed(data))
        except FrameRefused as exc:
            return [self._fail(exc.code, str(exc))]
        except h2.exceptions.ProtocolError as exc:
            code = int(exc.error_code)
            if self._h2.state_machine.state is not h2.connection.ConnectionState.CLOSED:
                # h2 queues its GOAWAY for errors in frames, not for a bad preface.
                self._h2.close_connection(code)
            self.closed = True
            return [ConnectionTerminated(code, self._h2.highest_inbound_stream_id, False, str(exc))]
        events: list[Event] = []
        for event in h2_events:
            if isinstance(event, h2.events.DataReceived):
                self._data(event, events)
            elif isinstance(event, h2.events.RequestReceived):
                self._request(event, events)
            elif isinstance(event, h2.events.StreamEnded):
                self._ended(event, events)
            elif isinstance(event, h2.events.WindowUpdated):
                events.append(WindowOpened(event.stream_id or 0))
            elif isinstance(event, h2.events.StreamReset):
                self._stream_reset(event, events)
            elif isinstance(event, h2.events.TrailersReceived):
                self._trailers_received(event, events)
            elif isinstance(event, h2.events.RemoteSettingsChanged):
                if _Settings.INITIAL_WINDOW_SIZE in event.changed_settings:
                    events.append(WindowOpened(0))
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.closed = True
                code, last = int(event.error_code or 0), int(event.last_stream_id or 0)
                events.append(ConnectionTerminated(code, last, True))
                break
        if scanner.unended_trailers:
            # Marks for streams h2 closed some other way (reset, or never ours) are spent.
            scanner.unended_trailers &= self._receiving
        if scanner.peer_goaway and not self._peer_goaway and not self.closed:
            self._peer_goaway = True
            events.append(PeerGoingAway())
        return events

    def _request(self, event: h2.events.RequestReceived, events: list[Event]) -> None:
        sid = event.stream_id
        assert sid is not None
        last = self._last_stream_id
        if (last is not None and sid > last) or (
            len(self._active) >= self.limits.max_concurrent_streams
        ):
            self.reset(sid, REFUSED_STREAM)  # unless a later frame of this batch reset it
            return
        try:
            head = request_head(event.headers)
        except BadRequest:
            self.reset(sid, PROTOCOL_ERROR)
            return
        ended = event.stream_ended is not None
        if ended and head.content_length:
            self.reset(sid, PROTOCOL_ERROR)  # a body announced, none sent
            return
        self._active.add(sid)
        if not ended:
            self._receiving.add(sid)
            if head.content_length is not None:
                self._unread[sid] = head.content_length
        events.append(RequestOpened(sid, head, ended))

    def _ended(self, event: h2.events.StreamEnded, events: list[Event]) -> None:
        sid = event.stream_id
        assert sid is not None
        self._receiving.discard(sid)
        trailers = self._trailers.pop(sid, ())
        if self._unread.pop(sid, 0):
            self._reject(sid, "body shorter than its content-length", events)
        elif sid in self._active and sid not in self._rejected:
            events.append(StreamEnded(sid, trailers))

    def _data(self, event: h2.events.DataReceived, events: list[Event]) -> None:
        sid = event.stream_id
        assert sid is not None
        length = event.flow_controlled_length or 0
        data = event.data or b""
        unread = self._unread.get(sid)
        if unread is not None:
            unread -= len(data)
            if unread < 0:
                self._reject(sid, "body longer than its content-length", events)
            else:
                self._unread[sid] = unread
        if sid in self._active and sid not in self._rejected:
            events.append(BodyData(sid, data, length))
        elif length:
            self._h2.acknowledge_received_data(length, sid)  # a refused stream's: give it back

    def _trailers_received(self, event: h2.events.TrailersReceived, events: list[Event]) -> None:
        sid = event.stream_id
        assert sid is not None
        if sid in self._scanner.unended_trailers:
            self._scanner.unended_trailers.discard(sid)
            self._reject(sid, "trailers without END_STREAM", events)
            return
        try:
            self._trailers[sid] = trailer_fields(event.headers or ())
        except BadRequest as exc:
            self._reject(sid, str(exc), events)

    def _reject(self, sid: int, detail: str, events: list[Event]) -> None:
        """Reset a malformed request's stream; its handler, if it runs, hears it is gone."""
        self.reset(sid, PROTOCOL_ERROR)
        if sid in self._active and sid not in self._rejected:
            self._rejected.add(sid)
            events.append(StreamReset(sid, PROTOCOL_ERROR, by_peer=False))

    def _stream_reset(self, event: h2.events.StreamReset, events: list[Event]) -> None:
        sid = event.stream_id
        assert sid is not None
        self._receiving.discard(sid)
        self._trailers.pop(sid, None)
        self._unread.pop(sid, None)
        if sid in self._active:
            events.append(StreamReset(sid, int(event.error_code or 0), event.remote_reset))

    def _fail(self, code: int, detail: str) -> ConnectionTerminated:
        """End the connection for a client that broke a limit; the GOAWAY goes out next."""
        last = self._h2.highest_inbound_stream_id
        self.close(code)
        return ConnectionTerminated(code, last, False, detail)

    # -- sending ------------------------------------------------------------------------------

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
        headers = response_headers(status, fields, length)
        self._send(self._h2.send_headers, stream_id, headers, end_stream=end_stream)

    def window(self, stream_id: int) -> int:
        """Bytes of body `send_data` would take now for `stream_id` (flow control)."""
        try:
            return self._h2.local_flow_control_window(stream_id)
        except (h2.exceptions.StreamClosedError, h2.exceptions.NoSuchStreamError):
            raise StreamClosed(stream_id) from None

    def send_data(self, stream_id: int, data: bytes | memoryview, end_stream: bool = False) -> int:
        """Queue as much of `data` as flow control allows now; returns how much that was.

        END_STREAM goes with the last byte, and only once all of `data` was taken.
        """
        size = len(data)
        allowed = min(size, self.window(stream_id)) if size else 0
        if allowed < size:
            end_stream = False
        send = self._h2.send_data
        step = self._h2.max_outbound_frame_size
        if allowed <= step:
            if allowed or end_stream:
                piece = data if allowed == size else data[:allowed]
                self._send(send, stream_id, piece, end_stream=end_stream)
                if allowed:
                    self._budgets.earn(1)  # the client may acknowledge it (see limits.py)
            return allowed
        view = memoryview(data)
        sent = 0
        while sent < allowed:
            n = min(step, allowed - sent)
            last = end_stream and sent + n == size
            self._send(send, stream_id, view[sent : sent + n], end_stream=last)
            sent += n
        self._budgets.earn(-(-allowed // step))
        return sent

    def send_trailers(self, stream_id: int, fields: Iterable[tuple[str, str]]) -> None:
        """Queue trailer fields, which end the stream."""
        headers = [
            (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in fields
        ]
        self._send(self._h2.send_headers, stream_id, headers, end_stream=True)

    def informational_100(self, stream_id: int) -> None:
        """Queue `100 Continue`: the client may send the body it is holding back."""
        self._send(self._h2.send_headers, stream_id, _CONTINUE)

    def consumed(self, stream_id: int, length: int) -> None:
        """The owner read `length` flow-controlled bytes: let the client send as much more."""
        if length and not self.closed:
            self._h2.acknowledge_received_data(length, stream_id)

    def reset(self, stream_id: int, code: int = INTERNAL_ERROR) -> None:
        """Queue RST_STREAM for a stream, unless it is closed already."""
        self._receiving.discard(stream_id)
        self._unread.pop(stream_id, None)
        if self.closed:
            return
        try:
            self._h2.reset_stream(stream_id, code)
        except (h2.exceptions.StreamClosedError, h2.exceptions.NoSuchStreamError):
            pass

    def finished(self, stream_id: int, drain: bool = False) -> None:
        """The owner is done with a stream; a client still sending its body is told to stop,
        unless `drain`: the rest is then taken (and dropped) as it comes, a cheaper end than
        a reset for a short rest, and one that every client handles."""
        self._active.discard(stream_id)
        self._rejected.discard(stream_id)
        if stream_id in self._receiving and not drain:
            # The answer is complete, so the rest of the request is not wanted: NO_ERROR.
            self.reset(stream_id, NO_ERROR)

    @property
    def open_streams(self) -> int:
        """Streams the owner is still serving."""
        return len(self._active)

    @property
    def last_stream_id(self) -> int:
        """The highest stream id the client opened."""
        return self._h2.highest_inbound_stream_id

    def goaway(self, code: int = NO_ERROR) -> None:
        """Announce the end: streams opened so far are served, newer ones refused."""
        if self.closed or self._last_stream_id is not None:
            return
        last = self._last_stream_id = self._h2.highest_inbound_stream_id
        frame = GoAwayFrame(0, error_code=code, last_stream_id=last)
        self._out += self._h2.data_to_send()
        self._out += frame.serialize()

    def close(self, code: int = NO_ERROR) -> None:
        """Queue the final GOAWAY; nothing is sent or received after it."""
        if self.closed:
            return
        self.closed = True
        last = self._last_stream_id
        if last is None:
            last = self._h2.highest_inbound_stream_id
        self._h2.close_connection(code, last_stream_id=last)

    def data_to_send(self) -> bytes:
        """The bytes to write now (and forget)."""
        data = self._h2.data_to_send()
        if self._out:
            data = bytes(self._out) + data
            self._out.clear()
        return data

    def _send(
        self, method: Callable[..., None], stream_id: int, payload: object, **flags: bool
    ) -> None:
        """Call one of h2's send methods; a stream the client closed is our StreamClosed."""
        if self.closed:
            raise StreamClosed(stream_id)
        try:
            method(stream_id, payload, **flags)
        except (h2.exceptions.StreamClosedError, h2.exceptions.NoSuchStreamError):
            raise StreamClosed(stream_id) from None
