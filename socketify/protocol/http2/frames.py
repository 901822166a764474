"""HTTP/2 frames on the wire: the numbers that name things, frame payloads read, frames written.

Every frame opens with a 9-byte header: a 24-bit payload length, a type, flags, and a
31-bit stream identifier (the top bit is reserved and ignored); `read_header` reads it. The
readers take one frame's payload and return plain values (no object per frame); a payload
that breaks the frame's own rules is an `Http2Error`. The writers return the frame's bytes,
ready to be queued: a header block longer than the peer's frame size continues in
CONTINUATION frames, and DATA is written as a header followed by the caller's own buffer (no
copy of the payload).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from enum import IntEnum

__all__ = [
    "ACK",
    "DEFAULT_FRAME_SIZE",
    "END_HEADERS",
    "END_STREAM",
    "FRAME_HEADER",
    "MAX_FRAME_SIZE",
    "MAX_WINDOW",
    "PADDED",
    "PREFACE",
    "PRIORITY_FLAG",
    "ErrorCode",
    "FrameType",
    "Http2Error",
    "Setting",
    "data_header",
    "goaway",
    "goaway_fields",
    "headers",
    "headers_fragment",
    "ping_ack",
    "priority_fields",
    "read_header",
    "rst_stream",
    "settings",
    "settings_ack",
    "settings_values",
    "unpad",
    "window_update",
    "word",
]

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
MAX_WINDOW = (1 << 31) - 1
DEFAULT_FRAME_SIZE = 1 << 14
MAX_FRAME_SIZE = (1 << 24) - 1

# length (high byte, low 16 bits), type, flags, stream identifier
FRAME_HEADER = struct.Struct(">BHBBL")
_pack = FRAME_HEADER.pack
_unpack = FRAME_HEADER.unpack_from
_U32 = struct.Struct(">L")
_SETTING = struct.Struct(">HL")

END_STREAM = 0x1
ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20


class FrameType(IntEnum):
    """The frame types HTTP/2 defines; any other type is skipped."""

    DATA = 0x0
    HEADERS = 0x1
    PRIORITY = 0x2
    RST_STREAM = 0x3
    SETTINGS = 0x4
    PUSH_PROMISE = 0x5
    PING = 0x6
    GOAWAY = 0x7
    WINDOW_UPDATE = 0x8
    CONTINUATION = 0x9


class ErrorCode(IntEnum):
    """The error codes of RST_STREAM and GOAWAY."""

    NO_ERROR = 0x0
    PROTOCOL_ERROR = 0x1
    INTERNAL_ERROR = 0x2
    FLOW_CONTROL_ERROR = 0x3
    SETTINGS_TIMEOUT = 0x4
    STREAM_CLOSED = 0x5
    FRAME_SIZE_ERROR = 0x6
    REFUSED_STREAM = 0x7
    CANCEL = 0x8
    COMPRESSION_ERROR = 0x9
    CONNECT_ERROR = 0xA
    ENHANCE_YOUR_CALM = 0xB
    INADEQUATE_SECURITY = 0xC
    HTTP_1_1_REQUIRED = 0xD


class Setting(IntEnum):
    """The SETTINGS parameters HTTP/2 defines; others are ignored."""

    HEADER_TABLE_SIZE = 0x1
    ENABLE_PUSH = 0x2
    MAX_CONCURRENT_STREAMS = 0x3
    INITIAL_WINDOW_SIZE = 0x4
    MAX_FRAME_SIZE = 0x5
    MAX_HEADER_LIST_SIZE = 0x6


class Http2Error(Exception):
    """A rule of the connection was broken: it ends with GOAWAY `code`."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(detail)
        self.code = code


# -- reading -----------------------------------------------------------------------------------


def read_header(data: bytes, pos: int = 0) -> tuple[int, int, int, int]:
    """The frame header at `pos`: (payload length, type, flags, stream id)."""
    high, low, kind, flags, stream_id = _unpack(data, pos)
    return (high << 16) | low, kind, flags, stream_id & 0x7FFFFFFF


def unpad(flags: int, payload: bytes) -> bytes:
    """The data of a DATA frame's payload, its padding taken off."""
    if not flags & PADDED:
        return payload
    length = len(payload)
    if not length or payload[0] >= length:
        raise Http2Error(ErrorCode.PROTOCOL_ERROR, "padding as long as the payload")
    return payload[1 : length - payload[0]]


def headers_fragment(flags: int, payload: bytes) -> tuple[bytes, int | None]:
    """A HEADERS frame's header block fragment, and the stream it depends on (None: no
    priority given)."""
    start, end = 0, len(payload)
    if flags & PADDED:
        if not end:
            raise Http2Error(ErrorCode.FRAME_SIZE_ERROR, "padded HEADERS without a pad length")
        start, end = 1, end - payload[0]
    depends_on = None
    if flags & PRIORITY_FLAG:
        if end - start < 5:
            raise Http2Error(ErrorCode.PROTOCOL_ERROR, "HEADERS too short for its priority")
        depends_on = _U32.unpack_from(payload, start)[0] & 0x7FFFFFFF
        start += 5
    if end < start:
        raise Http2Error(ErrorCode.PROTOCOL_ERROR, "HEADERS padding as long as its payload")
    return payload[start:end], depends_on


def priority_fields(payload: bytes) -> tuple[bool, int, int]:
    """A PRIORITY frame's (exclusive, stream depended on, weight 1-256)."""
    if len(payload) != 5:
        raise Http2Error(ErrorCode.FRAME_SIZE_ERROR, "PRIORITY of the wrong length")
    word = _U32.unpack_from(payload)[0]
    return bool(word >> 31), word & 0x7FFFFFFF, payload[4] + 1


def settings_values(payload: bytes) -> list[tuple[int, int]]:
    """A SETTINGS frame's (identifier, value) pairs, in order."""
    if len(payload) % 6:
        raise Http2Error(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS not a multiple of six bytes")
    return [_SETTING.unpack_from(payload, pos) for pos in range(0, len(payload), 6)]


def word(payload: bytes, what: str) -> int:
    """The one 32-bit word of a RST_STREAM (the code) or WINDOW_UPDATE (the increment)."""
    if len(payload) != 4:
        raise Http2Error(ErrorCode.FRAME_SIZE_ERROR, f"{what} of the wrong length")
    return _U32.unpack(payload)[0]


def goaway_fields(payload: bytes) -> tuple[int, int, bytes]:
    """A GOAWAY frame's (last stream id, error code, debug data)."""
    if len(payload) < 8:
        raise Http2Error(ErrorCode.FRAME_SIZE_ERROR, "GOAWAY too short")
    last, code = struct.unpack_from(">LL", payload)
    return last & 0x7FFFFFFF, code, payload[8:]


# -- writing -----------------------------------------------------------------------------------


def _header(length: int, kind: int, flags: int, stream_id: int) -> bytes:
    return _pack(length >> 16, length & 0xFFFF, kind, flags, stream_id)


def settings(values: Iterable[tuple[int, int]]) -> bytes:
    """A SETTINGS frame announcing `values` (identifier, value) in order."""
    payload = b"".join(_SETTING.pack(key, value) for key, value in values)
    return _header(len(payload), FrameType.SETTINGS, 0, 0) + payload


def settings_ack() -> bytes:
    """The acknowledgement of the peer's SETTINGS."""
    return _header(0, FrameType.SETTINGS, ACK, 0)


def ping_ack(opaque: bytes) -> bytes:
    """The answer to a PING: its eight bytes, back."""
    return _header(8, FrameType.PING, ACK, 0) + opaque


def goaway(last_stream_id: int, code: int, debug: bytes = b"") -> bytes:
    """A GOAWAY naming the last stream that will be processed."""
    return (
        _header(8 + len(debug), FrameType.GOAWAY, 0, 0)
        + _U32.pack(last_stream_id)
        + _U32.pack(code)
        + debug
    )


def rst_stream(stream_id: int, code: int) -> bytes:
    """A RST_STREAM ending one stream."""
    return _header(4, FrameType.RST_STREAM, 0, stream_id) + _U32.pack(code)


def window_update(stream_id: int, increment: int) -> bytes:
    """A WINDOW_UPDATE granting `increment` more bytes (stream 0: the connection)."""
    return _header(4, FrameType.WINDOW_UPDATE, 0, stream_id) + _U32.pack(increment)


def headers(stream_id: int, block: bytes, end_stream: bool, frame_size: int) -> bytes:
    """A HEADERS frame, and CONTINUATION frames when the block is over `frame_size`."""
    flags = END_STREAM if end_stream else 0
    if len(block) <= frame_size:
        return _header(len(block), FrameType.HEADERS, flags | END_HEADERS, stream_id) + block
    pieces = [block[start : start + frame_size] for start in range(0, len(block), frame_size)]
    out = [_header(len(pieces[0]), FrameType.HEADERS, flags, stream_id), pieces[0]]
    for piece in pieces[1:-1]:
        out += (_header(len(piece), FrameType.CONTINUATION, 0, stream_id), piece)
    last = pieces[-1]
    out += (_header(len(last), FrameType.CONTINUATION, END_HEADERS, stream_id), last)
    return b"".join(out)


def data_header(stream_id: int, length: int, end_stream: bool) -> bytes:
    """The header of a DATA frame whose `length` bytes of payload follow it."""
    return _header(length, FrameType.DATA, END_STREAM if end_stream else 0, stream_id)
