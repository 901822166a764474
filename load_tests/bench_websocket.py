"""Micro-benchmark of the sans-IO WebSocket layer (run: python load_tests/bench_websocket.py).

Reports µs to decode a 64-byte masked text frame on a kept connection, µs to encode frames,
MB/s unmasking and decoding 64 KiB frames, and the two unmasking strategies side by side
(the crossover justifies `frames._SMALL_UNMASK`). Times are CPU time of this process
(`time.process_time`), so other work on a shared machine disturbs them less.
"""

from __future__ import annotations

import os
import sys
import time
import timeit
from collections.abc import Callable
from functools import partial
from pathlib import Path

from socketify.protocol.websocket import (
    NEED_DATA,
    Connection,
    DeflateParams,
    Opcode,
    frame_bytes,
    unmask,
)
from socketify.protocol.websocket.frames import unmask_in_place

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.bench_websocket_client import MASK
from load_tests.bench_websocket_client import masked_frame as client_frame


def best_us(fn: Callable[[], object], number: int, rounds: int = 7) -> float:
    """Best-of-rounds µs per call."""
    return (
        min(timeit.repeat(fn, repeat=rounds, number=number, timer=time.process_time)) / number * 1e6
    )


def decode_us(frame: bytes, number: int) -> float:
    """µs to feed one frame and take its event (plus the NEED_DATA that follows)."""
    conn = Connection(max_message_bytes=None)

    def one() -> None:
        conn.feed(frame)
        conn.next_event()
        if conn.next_event() is not NEED_DATA:
            raise AssertionError("expected NEED_DATA")

    return best_us(one, number)


def unmask_big_int(data: bytes, mask: bytes, repeat: int, low: int) -> bytes:
    """frames.unmask's small path, with its per-size tables passed in."""
    key = int.from_bytes(mask, "little") * repeat
    return ((int.from_bytes(data, "little") ^ key) & low).to_bytes(len(data), "little")


def unmask_translate(data: bytes, mask: bytes) -> bytes:
    """frames.unmask's large path."""
    out = bytearray(data)
    unmask_in_place(out, mask)
    return bytes(out)


def main() -> None:
    text64 = client_frame(Opcode.TEXT, b"x" * 64)
    bin64k = client_frame(Opcode.BINARY, os.urandom(65536))
    payload64k = os.urandom(65536)
    buf64k = bytearray(payload64k)
    conn = Connection()
    deflating = Connection(deflate=DeflateParams(False, False, 15, 15, "permessage-deflate"))
    message = "x" * 64
    encoded = message.encode()

    rows = [
        ("decode 64-byte masked text frame", decode_us(text64, 100_000), None),
        ("decode 64 KiB masked binary frame", decode_us(bin64k, 500), 65536),
        (
            "encode: frame_bytes(TEXT, 64 B)",
            best_us(lambda: frame_bytes(1, encoded), 200_000),
            None,
        ),
        (
            "encode: conn.send_text(64 chars)",
            best_us(lambda: conn.send_text(message), 200_000),
            None,
        ),
        ("encode: send_text, deflate", best_us(lambda: deflating.send_text(message), 20_000), None),
        ("unmask(64 KiB) -> new bytes", best_us(lambda: unmask(payload64k, MASK), 500), 65536),
        (
            "unmask_in_place(64 KiB bytearray)",
            best_us(lambda: unmask_in_place(buf64k, MASK), 500),
            65536,
        ),
    ]
    for name, us, size in rows:
        rate = f"  {size / us:8.0f} MB/s" if size else ""
        print(f"{name:38s} {us:9.2f} µs{rate}")

    print("\nunmask strategies, µs: size, big-int XOR, strided translate")
    for size in (16, 64, 128, 256, 384, 512, 1024, 4096, 65536):
        data = os.urandom(size)
        repeat = sum(1 << (32 * k) for k in range((size + 3) >> 2))
        low = (1 << (8 * size)) - 1
        number = max(200, 2_000_000 // (size + 64))
        big = best_us(partial(unmask_big_int, data, MASK, repeat, low), number)
        lanes = best_us(partial(unmask_translate, data, MASK), number)
        print(f"{size:8d} {big:9.2f} {lanes:9.2f}")


if __name__ == "__main__":
    main()
