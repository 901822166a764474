"""A bound on the compressed header block a client may make us buffer.

h2 buffers a HEADERS frame and its CONTINUATION frames until the block ends, and bounds that
by the number of frames (64), not by bytes: at the largest frame size a client could park
about a megabyte per connection that no header-list limit sees, since that limit applies only
once the block is decoded (the 2024 CONTINUATION flood). This module walks the frame headers
of the inbound byte stream, nine bytes each, and sums the block's payload lengths; the
payloads themselves are skipped, never copied.
"""

from __future__ import annotations

__all__ = ["HeaderBlockGuard", "HeaderBlockTooLarge"]

_PREFACE_LENGTH = 24  # b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", which h2 checks
_HEADERS, _PUSH_PROMISE, _CONTINUATION = 0x1, 0x5, 0x9
_END_HEADERS = 0x4
_BLOCK_FRAMES = frozenset({_HEADERS, _PUSH_PROMISE, _CONTINUATION})


class HeaderBlockTooLarge(Exception):
    """A header block grew past the bound before it ended."""


class HeaderBlockGuard:
    """Follows frame boundaries in received bytes; raises once an open block is too large."""

    __slots__ = ("_head", "_skip", "block", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.block = 0  # bytes of the header block still open (0: none)
        self._skip = _PREFACE_LENGTH  # bytes before the next frame header
        self._head = b""  # the part of a frame header split across reads

    def feed(self, data: bytes) -> None:
        """Account for `data`, the next bytes the client sent."""
        size = len(data)
        offset = self._skip
        if offset >= size:
            self._skip = offset - size
            return
        if self._head:
            data = self._head + data[offset:]
            size, offset = len(data), 0
            self._head = b""
        while offset + 9 <= size:
            length = int.from_bytes(data[offset : offset + 3], "big")
            kind, flags = data[offset + 3], data[offset + 4]
            if kind in _BLOCK_FRAMES:
                # A HEADERS frame starts a block; a CONTINUATION adds to the open one.
                self.block = self.block + length if kind == _CONTINUATION else length
                if self.block > self.limit:
                    raise HeaderBlockTooLarge(f"header block over {self.limit} bytes")
                if flags & _END_HEADERS:
                    self.block = 0
            offset += 9 + length
        if offset > size:
            self._skip = offset - size
        else:
            self._skip = 0
            self._head = data[offset:]
