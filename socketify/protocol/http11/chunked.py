"""The chunked transfer coding of request bodies (RFC 9112 §7.1), sans-IO.

A `ChunkedDecoder` works on its parser's input buffer from the first size line to the end of
the trailer section. Sizes are checked against the body limit as each size line arrives, so a
client announcing too much gets 413 before sending it; trailers are read, bounded like a
header section, and kept as `trailers` once the body ended (fields no trailer may carry are
dropped: see `trailers.py`).

Framing lines must end in CRLF. A bare LF is refused here even though the request head
accepts one: inside a body a proxy that splits lines differently would see other chunk
boundaries than we do, which is how chunked request smuggling works. For the same reason a
bare CR is refused as soon as the byte after it arrives, and chunk extensions must follow
their grammar (they are otherwise ignored).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from socketify.protocol.http.trailers import is_forbidden_trailer
from socketify.protocol.http11.events import END_OF_MESSAGE, NEED_DATA, ParseError, Sentinel
from socketify.protocol.http11.grammar import CHUNK_EXTENSIONS, FIELD_VALUE, TOKEN

if TYPE_CHECKING:
    from socketify.protocol.http11.parser import RequestParser

__all__ = ["ChunkedDecoder"]

_HEX: Final = re.compile(r"[0-9A-Fa-f]+")
_SIZE_LINE_MAX: Final = 1024
_TRAILER_LINE_MAX: Final = 8192

# The decoder's states (`Final`: a compiled build inlines them).
SIZE: Final = 0
DATA: Final = 1
DATA_END: Final = 2
TRAILERS: Final = 3
DONE: Final = 4


class ChunkedDecoder:
    """Decodes one chunked body from `source.input`; events as RequestParser.next_event."""

    __slots__ = ("_remaining", "_seen", "_source", "_state", "_trailer_bytes", "trailers")

    def __init__(self, source: RequestParser) -> None:
        self._source = source
        self._state = SIZE
        self._remaining = 0
        self._seen = 0
        self._trailer_bytes = 0
        # (lower-case name, value) of the trailer fields kept, in order; whole once DONE
        self.trailers: list[tuple[str, str]] = []

    def next_event(self) -> bytes | Sentinel:
        """A body piece, NEED_DATA, or END_OF_MESSAGE after the trailers."""
        while True:
            state = self._state
            if state == DATA:
                return self._data()
            if state == DONE:
                return END_OF_MESSAGE
            line = self._take_line(_SIZE_LINE_MAX if state != TRAILERS else _TRAILER_LINE_MAX)
            if line is None:
                buf = self._source.input
                if state == DATA_END and buf and buf[0] != 13:
                    # The CR must come first: no need to wait for a line that cannot be right.
                    raise ParseError(400, "Missing CRLF after chunk data")
                return NEED_DATA
            if state == SIZE:
                self._size(line)
            elif state == DATA_END:
                if line:
                    raise ParseError(400, "Missing CRLF after chunk data")
                self._state = SIZE
            else:
                self._trailer(line)

    def _data(self) -> bytes | Sentinel:
        buf = self._source.input
        if not buf:
            if self._source.eof:
                raise ParseError(400, "Connection closed in the middle of the body")
            return NEED_DATA
        take = min(self._remaining, len(buf))
        piece = bytes(buf[:take])
        del buf[:take]
        self._remaining -= take
        if not self._remaining:
            self._state = DATA_END
        return piece

    def _take_line(self, limit: int) -> str | None:
        """Pop one CRLF-ended line (without the CRLF), or None if it is not complete yet."""
        buf = self._source.input
        end = buf.find(b"\n")
        if end < 0:
            if len(buf) > limit:
                raise ParseError(400, "Chunk framing line too long")
            if buf.find(b"\r", 0, len(buf) - 1) >= 0:  # no LF follows it: refuse at once
                raise ParseError(400, "Bare CR in chunk framing")
            if self._source.eof:
                raise ParseError(400, "Connection closed in the middle of the body")
            return None
        if end > limit:
            raise ParseError(400, "Chunk framing line too long")
        if not end or buf[end - 1] != 13:
            raise ParseError(400, "Bare LF in chunk framing")
        line = bytes(buf[: end - 1]).decode("latin-1")
        del buf[: end + 1]
        if "\r" in line:
            raise ParseError(400, "Bare CR in chunk framing")
        return line

    def _size(self, line: str) -> None:
        digits = _HEX.match(line)
        if digits is None or digits.end() > 16:
            raise ParseError(400, "Invalid chunk size")
        if digits.end() < len(line) and CHUNK_EXTENSIONS.fullmatch(line, digits.end()) is None:
            raise ParseError(400, "Malformed chunk extension")  # well-formed ones are ignored
        size = int(digits[0], 16)
        self._seen += size
        if self._seen > self._source.max_body_size:
            raise ParseError(413, "Body too large")
        if size:
            self._remaining = size
            self._state = DATA
        else:
            self._state = TRAILERS

    def _trailer(self, line: str) -> None:
        if not line:
            self._state = DONE
            return
        self._trailer_bytes += len(line) + 2
        if self._trailer_bytes > self._source.max_header_size:
            raise ParseError(431, "Trailer section too large")
        name, colon, value = line.partition(":")
        if not colon or TOKEN.fullmatch(name) is None:
            raise ParseError(400, "Malformed trailer field")
        value = value.strip(" \t")
        if FIELD_VALUE.fullmatch(value) is None:
            raise ParseError(400, "Invalid character in trailer value")
        lower = name.lower()
        if not is_forbidden_trailer(lower):
            self.trailers.append((lower, value))
