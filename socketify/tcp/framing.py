"""Iterate a stream as lines or as length-prefixed frames, and build frames to send."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from socketify.tcp.errors import FrameTooLarge, IncompleteRead

if TYPE_CHECKING:
    from socketify.tcp.connection import StreamConnection

__all__ = ["frames", "lines", "pack_frame"]

DEFAULT_MAX_FRAME = 1 << 20
_PREFIX_SIZES = (1, 2, 4, 8)


def lines(
    conn: StreamConnection, *, max_line: int | None = None, keepends: bool = False
) -> Iterator[bytes]:
    """Each line until the peer closes; without `keepends`, stripped of b"\\n" or b"\\r\\n".

    A last line without a newline is yielded too. `LineTooLong` past `max_line` bytes.
    """
    readline = conn.readline
    while line := readline(max_line):
        if not keepends:
            line = line[:-2] if line.endswith(b"\r\n") else line.removesuffix(b"\n")
        yield line


def frames(
    conn: StreamConnection, *, prefix: int = 4, max_size: int = DEFAULT_MAX_FRAME
) -> Iterator[bytes]:
    """Each frame's payload, each frame being a big-endian length of `prefix` bytes then data.

    Ends when the peer closes between frames; `IncompleteRead` if it closes inside one,
    `FrameTooLarge` when a length exceeds `max_size` (checked before reading the payload).
    """
    _check_prefix(prefix)
    while True:
        try:
            header = conn.recv_exactly(prefix)
        except IncompleteRead as exc:
            if exc.partial:
                raise
            return
        size = int.from_bytes(header, "big")
        if size > max_size:
            raise FrameTooLarge(size, max_size)
        yield conn.recv_exactly(size) if size else b""


def pack_frame(payload: bytes, *, prefix: int = 4) -> bytes:
    """`payload` behind its big-endian length in `prefix` bytes, ready for `conn.send`."""
    _check_prefix(prefix)
    if len(payload) >= 1 << (8 * prefix):
        raise ValueError(f"a {len(payload)}-byte payload does not fit a {prefix}-byte length")
    return len(payload).to_bytes(prefix, "big") + payload


def _check_prefix(prefix: int) -> None:
    if prefix not in _PREFIX_SIZES:
        raise ValueError(f"prefix must be one of {_PREFIX_SIZES} bytes, got {prefix!r}")
