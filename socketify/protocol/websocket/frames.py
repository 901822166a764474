"""RFC 6455 §5 wire format: opcodes, close codes, frame encoding and unmasking.

Everything here is stateless. The server never masks (§5.1), so an encoded frame does not
depend on the connection it is written to: a hub can call `frame_bytes` once per broadcast
and write the same bytes to every member.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Final

__all__ = [
    "CloseCode",
    "Opcode",
    "close_payload",
    "frame_bytes",
    "is_valid_close_code",
    "unmask",
    "unmask_in_place",
]


class Opcode(IntEnum):
    """Frame opcodes (RFC 6455 §5.2); every other value is reserved."""

    CONTINUATION = 0x0
    TEXT = 0x1
    BINARY = 0x2
    CLOSE = 0x8
    PING = 0x9
    PONG = 0xA


class CloseCode(IntEnum):
    """Close status codes (RFC 6455 §7.4.1 and the IANA registry)."""

    NORMAL = 1000
    GOING_AWAY = 1001
    PROTOCOL_ERROR = 1002
    UNSUPPORTED_DATA = 1003
    NO_STATUS = 1005  # reported when a close frame carried no code; never on the wire
    ABNORMAL = 1006  # reported when no close frame arrived; never on the wire
    INVALID_DATA = 1007
    POLICY_VIOLATION = 1008
    MESSAGE_TOO_BIG = 1009
    MANDATORY_EXTENSION = 1010
    INTERNAL_ERROR = 1011
    SERVICE_RESTART = 1012
    TRY_AGAIN_LATER = 1013
    BAD_GATEWAY = 1014
    TLS_HANDSHAKE = 1015  # never on the wire


# Codes a close frame may carry: the assigned ones that are not reserved for reporting
# (1005, 1006, 1015) plus the library/framework (3000-3999) and private (4000-4999) ranges.
# 1004 is reserved and 1016-2999 are unassigned, so a peer sending them is in error.
_WIRE_CODES: Final = frozenset({1000, 1001, 1002, 1003, *range(1007, 1015)})

MAX_CONTROL_PAYLOAD: Final = 125
MAX_CLOSE_REASON: Final = MAX_CONTROL_PAYLOAD - 2

_FIN: Final = 0x80
_RSV1: Final = 0x40
_LEN16: Final = struct.Struct("!BBH")
_LEN64: Final = struct.Struct("!BBQ")
# XOR tables for unmasking by translate: _XOR[k][b] == b ^ k.
_XOR: Final = [bytes(b ^ k for b in range(256)) for k in range(256)]
# Up to this size one big-int XOR beats four strided translates (load_tests/bench_websocket).
_SMALL_UNMASK: Final = 256
# For the big-int path: _REPEAT[n] * mask repeats the 4-byte mask over n bytes (rounded up to
# whole words) and _LOW[n] keeps the low n bytes of that.
_REPEAT: Final = [sum(1 << (32 * k) for k in range((n + 3) >> 2)) for n in range(_SMALL_UNMASK + 1)]
_LOW: Final = [(1 << (8 * n)) - 1 for n in range(_SMALL_UNMASK + 1)]


def is_valid_close_code(code: int) -> bool:
    """Whether a close frame may carry `code` (RFC 6455 §7.4)."""
    return code in _WIRE_CODES or 3000 <= code <= 4999


def frame_bytes(
    opcode: int, payload: bytes | bytearray | memoryview, *, fin: bool = True, rsv1: bool = False
) -> bytes:
    """Encode one unmasked (server) frame; control frames must be final and ≤ 125 bytes."""
    n = len(payload)
    if opcode > 2:  # PERF: plain int compares; data frames skip the control checks
        if opcode < 8 or opcode > 10:
            raise ValueError(f"reserved opcode {opcode:#x}")
        if n > MAX_CONTROL_PAYLOAD:
            raise ValueError(f"control frame payload is {n} bytes; the limit is 125")
        if not fin:
            raise ValueError("control frames cannot be fragmented")
        if rsv1:
            raise ValueError("control frames cannot be compressed")
    elif opcode < 0:
        raise ValueError(f"invalid opcode {opcode}")
    b0 = opcode | (_FIN if fin else 0) | (_RSV1 if rsv1 else 0)
    if n < 126:
        head = bytes((b0, n))
    elif n < 0x10000:
        head = _LEN16.pack(b0, 126, n)
    else:
        head = _LEN64.pack(b0, 127, n)
    return head + payload


def close_payload(code: int | None = CloseCode.NORMAL, reason: str = "") -> bytes:
    """The payload of a close frame: empty when `code` is None, else code + UTF-8 reason."""
    if code is None:
        if reason:
            raise ValueError("a close reason needs a close code")
        return b""
    if not is_valid_close_code(code):
        raise ValueError(f"close code {code} may not be sent")
    encoded = reason.encode("utf-8")
    if len(encoded) > MAX_CLOSE_REASON:
        raise ValueError(f"close reason is {len(encoded)} bytes in UTF-8; the limit is 123")
    return code.to_bytes(2, "big") + encoded


def unmask(data: bytes | bytearray | memoryview, mask: bytes | bytearray) -> bytes:
    """XOR `data` with the 4-byte `mask` repeated (RFC 6455 §5.3); its own inverse."""
    n = len(data)
    if n <= _SMALL_UNMASK:
        # PERF: one arbitrary-precision XOR over the whole payload, no per-byte Python loop;
        # the repeated key is one small-by-big multiplication, not a bytes concatenation.
        key = int.from_bytes(mask, "little") * _REPEAT[n]
        return ((int.from_bytes(data, "little") ^ key) & _LOW[n]).to_bytes(n, "little")
    out = bytearray(data)
    unmask_in_place(out, mask)
    return bytes(out)


def unmask_in_place(data: bytearray, mask: bytes | bytearray) -> None:
    """`unmask` for a large buffer we own, without copying it."""
    # PERF: byte i is XORed with mask[i % 4], so each of the four strided lanes is one
    # `translate` through a XOR table: about 2.5x the big-int XOR on 64 KiB.
    data[0::4] = data[0::4].translate(_XOR[mask[0]])
    data[1::4] = data[1::4].translate(_XOR[mask[1]])
    data[2::4] = data[2::4].translate(_XOR[mask[2]])
    data[3::4] = data[3::4].translate(_XOR[mask[3]])
