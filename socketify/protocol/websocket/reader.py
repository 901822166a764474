"""Client frames in, messages out: RFC 6455 §5 framing rules, §8.1 UTF-8, RFC 7692 inflating.

Theory of operation: `FrameReader` owns the connection's input buffer. Between frames it
parses a header and checks it at once (mask bit, RSV bits, opcode, control-frame limits,
fragmentation order, per-message size), so a bad frame fails before its payload is buffered.
Control frames (≤ 125 bytes) are handled whole. A data frame's payload is consumed as it
arrives: each piece is unmasked, inflated when the message is compressed, and, for text,
run through an incremental UTF-8 decoder, so invalid text fails at the first bad byte even
inside one large frame, and a message is never held twice (raw and decoded).

Anything that must fail the connection raises `Failure(code, reason)`; the `Connection`
turns it into a close frame and the final `Close` event. The reader is then abandoned.
"""

from __future__ import annotations

import codecs
from typing import Final

from socketify.protocol.http11.events import Sentinel
from socketify.protocol.websocket.deflate import Deflate, InflateError, MessageTooBig
from socketify.protocol.websocket.events import (
    NEED_DATA,
    BinaryFragment,
    BinaryMessage,
    Close,
    Event,
    Ping,
    Pong,
    TextFragment,
    TextMessage,
)
from socketify.protocol.websocket.frames import (
    _LOW,
    _REPEAT,
    _SMALL_UNMASK,
    CloseCode,
    is_valid_close_code,
    unmask,
    unmask_in_place,
)

__all__ = ["Failure", "FrameReader"]

_TEXT: Final = 0x1
_BINARY: Final = 0x2
_CLOSE: Final = 0x8
_PING: Final = 0x9
_KNOWN_OPCODES: Final = frozenset({0x0, 0x1, 0x2, 0x8, 0x9, 0xA})
_Utf8Decoder = codecs.getincrementaldecoder("utf-8")


class Failure(Exception):
    """The peer broke the protocol: fail the connection with close `code`."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"{code} {reason}")
        self.code = code
        self.reason = reason


def _protocol_error(reason: str) -> Failure:
    return Failure(CloseCode.PROTOCOL_ERROR, reason)


class FrameReader:
    """Turns a client's bytes into message, ping, pong and close events."""

    __slots__ = (
        "_compressed",
        "_decoder",
        "_deflate",
        "_fin",
        "_first",
        "_fragments",
        "_mask",
        "_opcode",
        "_parts",
        "_remaining",
        "_size",
        "_wire",
        "buf",
        "max_message_bytes",
    )

    def __init__(
        self, max_message_bytes: int | None, deflate: Deflate | None, fragments: bool
    ) -> None:
        self.buf = bytearray()
        self.max_message_bytes = max_message_bytes
        self._deflate = deflate
        self._fragments = fragments
        # The data frame being read: payload bytes still due (-1 between frames), its mask
        # rotated to line up with the next payload byte, and its FIN bit.
        self._remaining = -1
        self._mask = b""
        self._fin = False
        # The message being assembled: its opcode (0 when none is in progress), whether it
        # is compressed, its payload size so far (inflated) and compressed size on the wire.
        self._opcode = 0
        self._compressed = False
        self._size = 0
        self._wire = 0
        self._parts: list = []
        self._first = True  # the frame being read is its message's first (for fragments)
        self._decoder: codecs.IncrementalDecoder | None = None

    def next_event(self) -> Event | Sentinel:
        """Return the next event or NEED_DATA; raise Failure when the peer broke the rules."""
        buf = self.buf
        if not buf and self._remaining:
            return NEED_DATA  # PERF: the usual second call, after the message was taken
        if self._remaining < 0 and not self._opcode and not self._fragments:
            # PERF: the usual frame is small, final, uncompressed and already all here.
            n = len(buf)
            if n >= 6:
                b0 = buf[0]
                b1 = buf[1]
                if (b0 == 0x81 or b0 == 0x82) and 0x80 <= b1 < 0xFE:  # masked, 7-bit length
                    size = b1 & 0x7F
                    end = size + 6
                    limit = self.max_message_bytes
                    if n >= end and (limit is None or size <= limit):
                        # `unmask`'s big-int path, inlined: this is the hottest line.
                        key = int.from_bytes(buf[2:6], "little") * _REPEAT[size]
                        payload = (
                            (int.from_bytes(buf[6:end], "little") ^ key) & _LOW[size]
                        ).to_bytes(size, "little")
                        del buf[:end]
                        if b0 == 0x81:
                            try:
                                return TextMessage(payload.decode("utf-8"))
                            except UnicodeDecodeError:
                                raise Failure(CloseCode.INVALID_DATA, "invalid UTF-8") from None
                        return BinaryMessage(payload)
        while True:
            event = self._read_payload() if self._remaining >= 0 else self._read_header()
            if event is not None:
                return event

    # -- headers ----------------------------------------------------------------------------

    def _read_header(self) -> Event | Sentinel | None:
        """Parse and check a frame header; a control frame comes back as its event."""
        buf = self.buf
        n = len(buf)
        if n < 2:
            return NEED_DATA
        b0 = buf[0]
        b1 = buf[1]
        opcode = b0 & 0x0F
        fin = bool(b0 & 0x80)
        length = b1 & 0x7F
        if opcode not in _KNOWN_OPCODES:
            raise _protocol_error(f"reserved opcode {opcode:#x}")
        if not b1 & 0x80:
            raise _protocol_error("client frame is not masked")
        rsv = b0 & 0x70
        if rsv:
            if rsv != 0x40 or self._deflate is None:
                raise _protocol_error("reserved bits set without an extension using them")
            if opcode != _TEXT and opcode != _BINARY:
                raise _protocol_error("RSV1 on a control or continuation frame")
        if opcode >= _CLOSE:
            if not fin:
                raise _protocol_error("fragmented control frame")
            if length > 125:
                raise _protocol_error("control frame payload over 125 bytes")
            end = 6 + length
            if n < end:
                return NEED_DATA
            payload = unmask(buf[6:end], buf[2:6])
            del buf[:end]
            return _control_event(opcode, payload)
        if opcode:
            if self._opcode:
                raise _protocol_error("new data frame inside a fragmented message")
        elif not self._opcode:
            raise _protocol_error("continuation frame without a message to continue")
        start = 2
        if length == 126:
            if n < 4:
                return NEED_DATA
            length = int.from_bytes(buf[2:4], "big")
            start = 4
            if length < 126:
                raise _protocol_error("frame length not in its shortest form")
        elif length == 127:
            if n < 10:
                return NEED_DATA
            length = int.from_bytes(buf[2:10], "big")
            start = 10
            if length >> 63:
                raise _protocol_error("64-bit frame length with the top bit set")
            if length < 0x10000:
                raise _protocol_error("frame length not in its shortest form")
        if n < start + 4:
            return NEED_DATA
        if opcode:
            self._begin_message(opcode, bool(rsv))
        self._check_size(length)
        self._mask = bytes(buf[start : start + 4])
        del buf[: start + 4]
        self._remaining = length
        self._fin = fin
        return None

    def _begin_message(self, opcode: int, compressed: bool) -> None:
        self._opcode = opcode
        self._compressed = compressed
        self._size = 0
        self._wire = 0
        self._first = True
        if opcode == _TEXT:
            if self._decoder is None:
                self._decoder = _Utf8Decoder()
            else:
                self._decoder.reset()

    def _check_size(self, length: int) -> None:
        """Refuse a frame that would take its message over the limit, before buffering it."""
        limit = self.max_message_bytes
        if limit is None:
            return
        if not self._compressed:
            if self._size + length > limit:
                raise Failure(CloseCode.MESSAGE_TOO_BIG, "message too big")
            return
        # The inflated size is checked while inflating; this only stops a peer streaming
        # compressed data that never inflates to anything.
        self._wire += length
        if self._wire > 2 * limit + 4096:
            raise Failure(CloseCode.MESSAGE_TOO_BIG, "compressed message too big")

    # -- payloads ---------------------------------------------------------------------------

    def _read_payload(self) -> Event | Sentinel | None:
        """Consume what has arrived of the current data frame; an event when it completes."""
        remaining = self._remaining
        if remaining:
            buf = self.buf
            take = len(buf)
            if not take:
                return NEED_DATA
            if take > remaining:
                take = remaining
            mask = self._mask
            chunk = buf[:take]
            del buf[:take]
            data: bytes | bytearray
            if take > _SMALL_UNMASK:
                unmask_in_place(chunk, mask)
                data = chunk
            else:
                data = unmask(chunk, mask)
            if take & 3:
                shift = take & 3
                self._mask = mask[shift:] + mask[:shift]
            remaining -= take
            self._remaining = remaining
            self._absorb(data)
            if remaining:
                return NEED_DATA
        self._remaining = -1
        return self._end_frame()

    def _absorb(self, data: bytes | bytearray) -> None:
        if self._compressed:
            data = self._inflate(data, final=False)
        self._size += len(data)
        if not data:
            return
        if self._opcode == _TEXT:
            self._parts.append(self._decode(data, final=False))
        else:
            self._parts.append(data)

    def _inflate(self, data: bytes | bytearray, final: bool) -> bytes:
        assert self._deflate is not None
        limit = self.max_message_bytes
        budget = None if limit is None else limit - self._size
        try:
            if final:
                return self._deflate.end_message(budget)
            return self._deflate.decompress(data, budget)
        except MessageTooBig:
            raise Failure(CloseCode.MESSAGE_TOO_BIG, "message too big") from None
        except InflateError:
            raise Failure(CloseCode.INVALID_DATA, "invalid compressed data") from None

    def _decode(self, data: bytes | bytearray, final: bool) -> str:
        assert self._decoder is not None
        try:
            return self._decoder.decode(data, final)
        except UnicodeDecodeError:
            raise Failure(CloseCode.INVALID_DATA, "invalid UTF-8") from None

    def _end_frame(self) -> Event | None:
        text = self._opcode == _TEXT
        if self._fin:
            if self._compressed:
                tail = self._inflate(b"", final=True)
                self._size += len(tail)
                if tail:
                    self._parts.append(self._decode(tail, final=False) if text else tail)
            if text:
                self._parts.append(self._decode(b"", final=True))
        elif not self._fragments:
            return None
        parts = self._parts
        self._parts = []
        first = self._first
        self._first = False
        if self._fin:
            self._opcode = 0
        if self._fragments:
            if text:
                return TextFragment("".join(parts), first, self._fin)
            return BinaryFragment(b"".join(parts), first, self._fin)
        if text:
            return TextMessage("".join(parts))
        return BinaryMessage(bytes(parts[0]) if len(parts) == 1 else b"".join(parts))


def _control_event(opcode: int, payload: bytes) -> Event:
    if opcode == _PING:
        return Ping(payload)
    if opcode != _CLOSE:
        return Pong(payload)
    if not payload:
        return Close(CloseCode.NO_STATUS)
    if len(payload) == 1:
        raise _protocol_error("close frame payload of one byte")
    code = int.from_bytes(payload[:2], "big")
    if not is_valid_close_code(code):
        raise _protocol_error(f"invalid close code {code}")
    try:
        reason = payload[2:].decode("utf-8")
    except UnicodeDecodeError:
        raise Failure(CloseCode.INVALID_DATA, "close reason is not valid UTF-8") from None
    return Close(code, reason)
