"""What the connection checks in frame headers before h2 parses the frames.

h2 looks at a frame only once all of it has arrived, and some rules it does not keep. The
`FrameScanner` walks the frame headers of the inbound byte stream, nine bytes each, before h2
gets the bytes; payloads are skipped, never copied. It refuses at once:

- bytes that do not open with the client connection preface (PROTOCOL_ERROR);
- a first frame after the preface that is not SETTINGS (PROTOCOL_ERROR, RFC 9113 §3.4);
- a frame longer than our SETTINGS_MAX_FRAME_SIZE (FRAME_SIZE_ERROR), as soon as its header
  says so: h2 would first buffer up to 16 MiB of payload;
- a SETTINGS acknowledgement that carries a payload (FRAME_SIZE_ERROR, RFC 9113 §6.5);
- a frame of a kind that costs work but carries no request (RST_STREAM, SETTINGS, PING,
  PRIORITY, WINDOW_UPDATE, empty DATA, unknown types) past its kind's per-second budget
  (ENHANCE_YOUR_CALM, see `limits.py`), before h2 parses a flood of them;
- a header block (HEADERS or PUSH_PROMISE and its CONTINUATIONs) past a bound in bytes
  (ENHANCE_YOUR_CALM). h2 bounds a block by its number of frames (64), not by bytes: at the
  largest frame size a client could park about a megabyte per connection that no
  header-list limit sees, since that limit applies only once the block is decoded (the 2024
  CONTINUATION flood).

A HEADERS frame on a stream that already had its request headers is the trailer section, and
must end the stream (RFC 9113 section 8.1). h2 makes one without END_STREAM an error of the
whole connection; it is a malformed request, an error of its stream alone. So the scanner
sets END_STREAM on such a frame before h2 has it (h2 still decodes the block, so HPACK stays
in step) and names the stream in `unended_trailers`; the connection then resets the stream.

It also keeps the client's GOAWAY from h2, which takes any received GOAWAY as the end of the
connection and would send nothing more, not even the answers to the client's open requests
(the last stream id in a client's GOAWAY names streams *we* opened: none). h2 gets the frame
with a frame type that is not defined, which it skips, and `peer_goaway` becomes True. So
that the type byte can be changed before h2 has it, a frame header split across reads is
held back until it is whole.
"""

from __future__ import annotations

import time

from h2.errors import ErrorCodes

from socketify.protocol.http2.limits import FrameBudgets

__all__ = ["FrameRefused", "FrameScanner"]

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_SETTINGS, _GOAWAY = 0x4, 0x7
_HEADERS, _PUSH_PROMISE, _CONTINUATION = 0x1, 0x5, 0x9
_ACK = 0x1
_END_STREAM = 0x1
_END_HEADERS = 0x4
_BLOCK_FRAMES = frozenset({_HEADERS, _PUSH_PROMISE, _CONTINUATION})
_HIDDEN = 0xF7  # a frame type no specification defines: h2 skips the frame
_PROTOCOL_ERROR = int(ErrorCodes.PROTOCOL_ERROR)
_FRAME_SIZE_ERROR = int(ErrorCodes.FRAME_SIZE_ERROR)
_ENHANCE_YOUR_CALM = int(ErrorCodes.ENHANCE_YOUR_CALM)


class FrameRefused(Exception):
    """A frame header broke a rule: the connection ends with GOAWAY `code`."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(detail)
        self.code = code


class FrameScanner:
    """Follows frame boundaries in received bytes and checks each frame header."""

    __slots__ = (
        "_first",
        "_head",
        "_last_headers",
        "_preface",
        "_skip",
        "block",
        "block_limit",
        "budgets",
        "frame_limit",
        "peer_goaway",
        "unended_trailers",
    )

    def __init__(
        self, frame_limit: int, block_limit: int, budgets: FrameBudgets | None = None
    ) -> None:
        self.frame_limit = frame_limit  # our SETTINGS_MAX_FRAME_SIZE
        self.block_limit = block_limit
        self.budgets = budgets  # per-second budgets of frames that carry nothing
        self.block = 0  # bytes of the header block still open (0: none)
        self.peer_goaway = False  # the client sent GOAWAY
        self._preface = len(PREFACE)  # preface bytes still to come
        self._first = True  # the next frame is the first after the preface
        self._skip = len(PREFACE)  # bytes before the next frame header
        self._head = b""  # the start of a frame header split across reads
        self._last_headers = 0  # the highest stream id a HEADERS frame named
        # Streams whose trailers came without END_STREAM (set by us); the connection resets
        # them and forgets them here.
        self.unended_trailers: set[int] = set()

    def feed(self, data: bytes) -> bytes:
        """Check `data`, the next bytes the client sent; returns the bytes h2 gets now."""
        if self._preface:
            self._check_preface(data)
        size = len(data)
        offset = self._skip
        if offset >= size:
            self._skip = offset - size
            return data
        if self._head:
            data = self._head + data  # `_skip` is 0 while a header is held back
            size = len(data)
            self._head = b""
        hidden: bytearray | None = None  # a copy, made only to change a frame header
        budgets = self.budgets
        now = time.monotonic()
        while offset + 9 <= size:
            length = int.from_bytes(data[offset : offset + 3], "big")
            kind, flags = data[offset + 3], data[offset + 4]
            if length > self.frame_limit:
                raise FrameRefused(_FRAME_SIZE_ERROR, f"a frame of {length} bytes")
            if budgets is not None:
                flood = budgets.charge(kind, length, flags, now)
                if flood is not None:
                    raise FrameRefused(_ENHANCE_YOUR_CALM, flood)
            if self._first:
                if kind != _SETTINGS:
                    raise FrameRefused(_PROTOCOL_ERROR, "the preface is not followed by SETTINGS")
                self._first = False
            if kind in _BLOCK_FRAMES:
                if kind == _HEADERS:
                    sid = int.from_bytes(data[offset + 5 : offset + 9], "big") & 0x7FFFFFFF
                    if sid > self._last_headers:
                        self._last_headers = sid
                    elif sid and not flags & _END_STREAM:
                        # Trailers that leave the stream open: see the module's docstring.
                        if hidden is None:
                            hidden = bytearray(data)
                        hidden[offset + 4] = flags | _END_STREAM
                        self.unended_trailers.add(sid)
                # A HEADERS frame starts a block; a CONTINUATION adds to the open one.
                self.block = self.block + length if kind == _CONTINUATION else length
                if self.block > self.block_limit:
                    raise FrameRefused(
                        _ENHANCE_YOUR_CALM, f"header block over {self.block_limit} bytes"
                    )
                if flags & _END_HEADERS:
                    self.block = 0
            elif kind == _SETTINGS and flags & _ACK and length:
                raise FrameRefused(_FRAME_SIZE_ERROR, "a SETTINGS acknowledgement with a payload")
            elif (
                kind == _GOAWAY
                and length >= 8
                and not int.from_bytes(data[offset + 5 : offset + 9], "big") & 0x7FFFFFFF
            ):
                # A well-formed GOAWAY; h2 still judges any other, and refuses it.
                if hidden is None:
                    hidden = bytearray(data)
                hidden[offset + 3] = _HIDDEN
                self.peer_goaway = True
            offset += 9 + length
        if hidden is not None:
            data = bytes(hidden)
        if offset > size:
            self._skip = offset - size
        else:
            self._skip = 0
            if offset < size:
                self._head = data[offset:]
                data = data[:offset]
        return data

    def _check_preface(self, data: bytes) -> None:
        done = len(PREFACE) - self._preface
        expected = PREFACE[done : done + len(data)]
        if data[: len(expected)] != expected:
            raise FrameRefused(_PROTOCOL_ERROR, "not the HTTP/2 connection preface")
        self._preface -= len(expected)
