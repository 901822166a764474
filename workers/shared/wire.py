"""The records workers and the master's state server exchange over their rings.

Worker -> master (the worker's *up* ring):

- request ``b"Q" id:u32 op:u8 key_len:u16 key args...`` — a store operation; the master answers
  every request exactly once;
- publish ``b"P" channel_len:u16 channel payload`` — a bus message; the master copies the very
  same bytes to every other worker's down ring (the publisher delivers locally itself).

Master -> worker (the worker's *down* ring): replies ``b"A" id:u32 status:u8 body`` and the
publish records relayed unchanged.

Everything is fixed-layout ``struct`` packing: values are opaque bytes, never pickled, so a
worker cannot make the master run code.
"""

from __future__ import annotations

import math
import struct
from enum import IntEnum

__all__ = [
    "ANSWER",
    "PUBLISH",
    "REQUEST",
    "Op",
    "Status",
    "compare_and_set_args",
    "decode_compare_and_set",
    "decode_publish",
    "encode_answer",
    "encode_publish",
    "encode_request",
]

REQUEST = ord("Q")
PUBLISH = ord("P")
ANSWER = ord("A")

_REQ = struct.Struct("<BIBH")  # kind, id, op, key length
_ANS = struct.Struct("<BIB")  # kind, id, status
_PUB = struct.Struct("<BH")  # kind, channel length
F64 = struct.Struct("<d")
I64 = struct.Struct("<q")
TTL_AND_AMOUNT = struct.Struct("<dq")
TTL_AND_LENGTH = struct.Struct("<dq")  # compare-and-set: ttl, then the expected value's length
BUCKET = struct.Struct("<ddd")  # capacity, refill per second, now (NaN: the master's clock)
TAKEN = struct.Struct("<Bdd")  # allowed, remaining, reset seconds
NO_TTL = math.nan


class Op(IntEnum):
    """Store operations (``workers.shared.state_server`` has the argument layout after the key)."""

    GET = 1
    SET = 2  # args: ttl f64 (NaN: none), then the value
    DELETE = 3
    INCR = 4  # args: ttl f64, amount i64
    TAKE = 5  # args: capacity, refill_per_second, now (f64 each)
    CLEAR_PREFIX = 6  # the key is the prefix
    COUNT_PREFIX = 7
    PING = 8
    COMPARE_AND_SET = 9  # args: ttl f64, expected length i64 (-1: absent), expected, value


class Status(IntEnum):
    """How a request ended."""

    OK = 0
    MISSING = 1  # GET of an absent or expired key
    ERROR = 2  # the body is a UTF-8 message; the client raises StateError


def encode_request(request_id: int, op: Op, key: bytes, args: bytes = b"") -> bytes:
    """A request record."""
    return _REQ.pack(REQUEST, request_id, op, len(key)) + key + args


def decode_request(record: bytes) -> tuple[int, int, bytes, memoryview]:
    """``(id, op, key, args)`` of a request record."""
    _, request_id, op, key_len = _REQ.unpack_from(record)
    start = _REQ.size
    view = memoryview(record)
    return request_id, op, record[start : start + key_len], view[start + key_len :]


def encode_answer(request_id: int, status: Status, body: bytes = b"") -> bytes:
    """An answer record."""
    return _ANS.pack(ANSWER, request_id, status) + body


def decode_answer(record: bytes) -> tuple[int, int, bytes]:
    """``(id, status, body)`` of an answer record."""
    _, request_id, status = _ANS.unpack_from(record)
    return request_id, status, record[_ANS.size :]


def encode_publish(channel: bytes, payload: bytes) -> bytes:
    """A publish record."""
    return _PUB.pack(PUBLISH, len(channel)) + channel + payload


def decode_publish(record: bytes) -> tuple[bytes, bytes]:
    """``(channel, payload)`` of a publish record."""
    _, channel_len = _PUB.unpack_from(record)
    start = _PUB.size
    return record[start : start + channel_len], record[start + channel_len :]


def compare_and_set_args(ttl: float, expected: bytes | None, value: bytes) -> bytes:
    """The arguments of a COMPARE_AND_SET request (``ttl``: NaN for none)."""
    length = -1 if expected is None else len(expected)
    return TTL_AND_LENGTH.pack(ttl, length) + (expected or b"") + value


def decode_compare_and_set(args: memoryview) -> tuple[float, bytes | None, bytes]:
    """``(ttl, expected, value)`` of a COMPARE_AND_SET request's arguments."""
    ttl, length = TTL_AND_LENGTH.unpack_from(args)
    start = TTL_AND_LENGTH.size
    if length < 0:
        return ttl, None, bytes(args[start:])
    return ttl, bytes(args[start : start + length]), bytes(args[start + length :])
