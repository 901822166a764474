"""The server side of one WebSocket connection, sans-IO: bytes in, events out, bytes to send.

Theory of operation: the connection greenlet feeds whatever `recv` returned (`b""` for EOF)
and pulls events until `NEED_DATA`; then it writes `data_to_send()`, which holds the replies
the protocol makes on its own: pongs (with `auto_pong`), the echo of the peer's close, and
the close frame of a connection we fail. Application sends (`send_text`, `ping`, `close`, ...)
return the bytes to write now: any such pending replies first, then their own frame. So the
wire order is the protocol order (a pong for a ping that arrived before a message goes out
before the echo of that message) even when the handler answers in the middle of the loop,
and any greenlet may send while another one reads.

The close handshake (RFC 6455 §7) is the state table below. Whoever ends the connection,
exactly one `Close` event comes out, carrying the code actually exchanged:

- the peer closes first: we echo its code (an empty close gets an empty close: 1005 never
  goes on the wire) and report its code, or 1005 when it sent none;
- we close first: `close()` moves to CLOSE_SENT; messages still arriving are delivered; the
  peer's close (or EOF, or the caller's timeout, fed as EOF) ends it and reports our code;
- the peer breaks the rules: we "fail the connection" (§7.1.7): send 1002/1007/1009 unless a
  close is already out, report that code, and read nothing more;
- EOF with no close frame either way reports 1006.

After the `Close` event, write `data_to_send()` and close the TCP connection; further input is
ignored and `next_event()` returns CLOSED.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import Enum
from typing import Final

from socketify.protocol.http11.events import Sentinel
from socketify.protocol.websocket.deflate import Deflate, DeflateParams
from socketify.protocol.websocket.events import (
    CLOSED,
    NEED_DATA,
    Close,
    Event,
    LocalProtocolError,
    Ping,
)
from socketify.protocol.websocket.frames import (
    CloseCode,
    Opcode,
    close_payload,
    frame_bytes,
)
from socketify.protocol.websocket.reader import Failure, FrameReader

__all__ = ["TRANSITIONS", "Connection", "State", "Trigger"]


class State(Enum):
    """Where the close handshake stands."""

    OPEN = "open"
    CLOSE_SENT = "close sent"  # our close frame is out; waiting for the peer's
    CLOSED = "closed"  # the Close event is out; flush and close TCP


class Trigger(Enum):
    """What moves the state."""

    SEND_CLOSE = "we send a close frame"
    RECEIVE_CLOSE = "the peer's close frame arrives"
    FAIL = "the peer broke the protocol"
    EOF = "the transport ended (or the close wait timed out)"


TRANSITIONS: Final[dict[tuple[State, Trigger], State]] = {
    (State.OPEN, Trigger.SEND_CLOSE): State.CLOSE_SENT,
    (State.OPEN, Trigger.RECEIVE_CLOSE): State.CLOSED,  # echo queued, report the peer's code
    (State.OPEN, Trigger.FAIL): State.CLOSED,  # our error close queued, report it
    (State.OPEN, Trigger.EOF): State.CLOSED,  # report 1006
    (State.CLOSE_SENT, Trigger.RECEIVE_CLOSE): State.CLOSED,  # report our code, clean
    (State.CLOSE_SENT, Trigger.FAIL): State.CLOSED,  # report our code
    (State.CLOSE_SENT, Trigger.EOF): State.CLOSED,  # report our code, not clean
}

# PERF: Enum attribute lookups cost ~0.1 µs each on the hot path; compare against these.
_OPEN: Final = State.OPEN
_CLOSED: Final = State.CLOSED
_TEXT: Final = int(Opcode.TEXT)
_BINARY: Final = int(Opcode.BINARY)
_PONG_HEAD: Final = int(Opcode.PONG) | 0x80
_ECHO_EMPTY_CLOSE: Final = frame_bytes(Opcode.CLOSE, b"")


class Connection:
    """The server end of a WebSocket connection after a successful handshake."""

    __slots__ = (
        "_deflate",
        "_eof",
        "_out",
        "_out_compressed",
        "_reader",
        "_sending",
        "_sent_close",
        "_state",
        "auto_pong",
    )

    def __init__(
        self,
        *,
        max_message_bytes: int | None = 1 << 20,
        deflate: DeflateParams | None = None,
        auto_pong: bool = True,
        fragments: bool = False,
    ) -> None:
        self._deflate = Deflate(deflate) if deflate is not None else None
        self._reader = FrameReader(max_message_bytes, self._deflate, fragments)
        self._state = State.OPEN
        self._eof = False
        self._out = bytearray()
        self._sending = 0  # opcode of our fragmented message in progress, 0 when none
        self._out_compressed = False  # whether that message is compressed
        self._sent_close: tuple[int, str] | None = None
        self.auto_pong = auto_pong

    @property
    def state(self) -> State:
        """Where the close handshake stands."""
        return self._state

    @property
    def deflate(self) -> DeflateParams | None:
        """The permessage-deflate parameters in use, if any."""
        return self._deflate.params if self._deflate is not None else None

    @property
    def max_message_bytes(self) -> int | None:
        """The per-message size limit (after inflating), None for none."""
        return self._reader.max_message_bytes

    # -- input ------------------------------------------------------------------------------

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes; `b""` means the peer will send nothing more (or we gave up)."""
        if self._state is _CLOSED:
            return
        if data:
            self._reader.buf += data
        else:
            self._eof = True

    def next_event(self) -> Event | Sentinel:
        """The next event, NEED_DATA when more input is needed, CLOSED after the Close event."""
        if self._state is _CLOSED:
            return CLOSED
        try:
            event = self._reader.next_event()
        except Failure as failure:
            return self._fail(failure.code, failure.reason)
        if event is NEED_DATA:
            return self._end_of_input() if self._eof else NEED_DATA
        cls = type(event)
        if cls is Ping:
            if self.auto_pong and self._state is _OPEN:
                payload = event.payload  # type: ignore[union-attr]
                self._out += bytes((_PONG_HEAD, len(payload))) + payload
        elif cls is Close:
            return self._peer_closed(event)  # type: ignore[arg-type]
        return event

    def events(self) -> Iterator[Event]:
        """Yield events until more input is needed or the connection is over."""
        while not isinstance(event := self.next_event(), Sentinel):
            yield event

    def data_to_send(self) -> bytes:
        """Take the bytes the protocol itself wants written (pongs, close replies)."""
        if not self._out:
            return b""
        out = bytes(self._out)
        self._out.clear()
        return out

    def _after_pending(self, frame: bytes) -> bytes:
        """`frame`, preceded by any pending protocol replies (which it takes)."""
        if not self._out:
            return frame
        out = bytes(self._out) + frame
        self._out.clear()
        return out

    # -- output -----------------------------------------------------------------------------

    def send_text(self, text: str, *, fin: bool = True) -> bytes:
        """Bytes to write for a text message (or, with `fin=False`, the next part of one)."""
        payload = text.encode("utf-8")
        if fin and self._deflate is None and self._state is _OPEN and not self._sending:
            # PERF: the common case, a whole uncompressed message with a 7-bit length.
            n = len(payload)
            if n < 126:
                frame = bytes((0x81, n)) + payload
                return self._after_pending(frame) if self._out else frame
        return self._send_data(_TEXT, payload, fin)

    def send_binary(self, data: bytes | bytearray | memoryview, *, fin: bool = True) -> bytes:
        """Bytes to write for a binary message (or, with `fin=False`, the next part of one)."""
        return self._send_data(_BINARY, data, fin)

    def send_raw(self, frame: bytes) -> bytes:
        """Check that a pre-encoded frame (`frame_bytes`) may go out now; the bytes to write."""
        self._check_open("send a frame")
        if self._sending:
            raise LocalProtocolError("a fragmented message is being sent; finish it first")
        return self._after_pending(frame)

    def ping(self, payload: bytes = b"") -> bytes:
        """A ping frame (payload ≤ 125 bytes)."""
        self._check_open("ping")
        return self._after_pending(frame_bytes(Opcode.PING, payload))

    def pong(self, payload: bytes = b"") -> bytes:
        """A pong frame, e.g. an answer to a Ping event when `auto_pong` is off."""
        self._check_open("pong")
        return self._after_pending(frame_bytes(Opcode.PONG, payload))

    def close(self, code: int | None = CloseCode.NORMAL, reason: str = "") -> bytes:
        """Start the close handshake: our close frame; `code=None` sends an empty one."""
        self._check_open("close")
        frame = frame_bytes(Opcode.CLOSE, close_payload(code, reason))
        self._sent_close = (CloseCode.NO_STATUS if code is None else code, reason)
        self._move(Trigger.SEND_CLOSE)
        return self._after_pending(frame)

    def _send_data(self, opcode: int, payload: bytes | bytearray | memoryview, fin: bool) -> bytes:
        self._check_open("send data")
        sending = self._sending
        deflate = self._deflate
        frame_opcode: int
        if sending:
            if sending != opcode:
                kind = "text" if sending == _TEXT else "binary"
                raise LocalProtocolError(f"a fragmented {kind} message is in progress")
            frame_opcode = 0  # continuation
            compressed = self._out_compressed
            rsv1 = False  # RFC 7692 §6: RSV1 marks the first frame of a message only
        else:
            frame_opcode = opcode
            compressed = rsv1 = deflate is not None and (
                not fin or len(payload) >= deflate.params.min_size
            )
            self._out_compressed = compressed
        if compressed:
            assert deflate is not None
            payload = deflate.compress(bytes(payload), fin)
        self._sending = 0 if fin else opcode
        return self._after_pending(frame_bytes(frame_opcode, payload, fin=fin, rsv1=rsv1))

    def _check_open(self, action: str) -> None:
        if self._state is not _OPEN:
            why = "we sent a close frame" if self._sent_close else "the connection is closed"
            raise LocalProtocolError(f"cannot {action}: {why}")

    # -- the close handshake ----------------------------------------------------------------

    def _move(self, trigger: Trigger) -> None:
        self._state = TRANSITIONS[(self._state, trigger)]

    def _peer_closed(self, event: Close) -> Close:
        if self._state is State.OPEN:
            code = event.code
            self._out += (
                _ECHO_EMPTY_CLOSE
                if code == CloseCode.NO_STATUS
                else frame_bytes(Opcode.CLOSE, code.to_bytes(2, "big"))
            )
            report = Close(code, event.reason)
        else:
            assert self._sent_close is not None
            report = Close(*self._sent_close)
        self._move(Trigger.RECEIVE_CLOSE)
        return report

    def _fail(self, code: int, reason: str) -> Close:
        if self._state is State.OPEN:
            self._out += frame_bytes(Opcode.CLOSE, close_payload(code, reason))
            report = Close(code, reason, clean=False)
        else:
            assert self._sent_close is not None
            report = Close(*self._sent_close, clean=False)
        self._move(Trigger.FAIL)
        return report

    def _end_of_input(self) -> Close:
        if self._state is State.OPEN:
            report = Close(CloseCode.ABNORMAL, "", clean=False)
        else:
            assert self._sent_close is not None
            report = Close(*self._sent_close, clean=False)
        self._move(Trigger.EOF)
        return report
