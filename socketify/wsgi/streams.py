"""The two streams of a WSGI environ: `wsgi.input` (the request body) and `wsgi.errors`.

`InputStream` reads the request's body as the app asks for it: nothing is read before the
first call (so a client that sent `Expect: 100-continue` is told to go on only then), and a
read that needs bytes not yet arrived parks only the request's greenlet. It follows what
gunicorn and werkzeug do where PEP 3333 is loose: `read()` without a size returns the rest,
`readline(size)` stops at `size` bytes, and the stream simply ends with the body, whether
that was framed by Content-Length or chunked (hence `wsgi.input_terminated`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

__all__ = ["ErrorStream", "InputStream"]

error_log = logging.getLogger("socketify.error")


class InputStream:
    """`wsgi.input`: a read-only binary file over a body that arrives in pieces."""

    __slots__ = ("_buffer", "_ended", "_pieces", "_source")

    def __init__(self, source: Callable[[], Iterable[bytes]]) -> None:
        self._source = source  # called on the first read: the body's pieces
        self._pieces: Iterator[bytes] | None = None
        self._buffer = bytearray()
        self._ended = False

    def _more(self) -> bool:
        """Append the next piece of the body to the buffer; False at its end."""
        if self._ended:
            return False
        pieces = self._pieces
        if pieces is None:
            pieces = self._pieces = iter(self._source())
        piece = next(pieces, b"")
        if not piece:
            self._ended = True
            return False
        self._buffer += piece
        return True

    def read(self, size: int | None = -1) -> bytes:
        """Up to `size` bytes (all the rest when `size` is None or negative); b"" at the end."""
        buffer = self._buffer
        if size is None or size < 0:
            while self._more():
                pass
            data = bytes(buffer)
            buffer.clear()
            return data
        while len(buffer) < size and self._more():
            pass
        data = bytes(buffer[:size])
        del buffer[:size]
        return data

    def readline(self, size: int | None = -1) -> bytes:
        """One line, newline included, of at most `size` bytes when `size` is given."""
        buffer = self._buffer
        limit = None if size is None or size < 0 else size
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            if end >= 0:
                end += 1
                break
            if limit is not None and len(buffer) >= limit:
                end = limit
                break
            start = len(buffer)
            if not self._more():
                end = len(buffer)
                break
        if limit is not None:
            end = min(end, limit)
        data = bytes(buffer[:end])
        del buffer[:end]
        return data

    def readlines(self, hint: int | None = -1) -> list[bytes]:
        """The remaining lines; stops once about `hint` bytes were read when it is given."""
        lines = []
        total = 0
        while line := self.readline():
            lines.append(line)
            total += len(line)
            if hint is not None and 0 < hint <= total:
                break
        return lines

    def __iter__(self) -> Iterator[bytes]:
        while line := self.readline():
            yield line

    def close(self) -> None:
        """Nothing to release: the server owns the connection."""


class ErrorStream:
    """`wsgi.errors`: each write becomes one record of the `socketify.error` log."""

    __slots__ = ()

    def write(self, text: str) -> int:
        """Log `text` (without its trailing newline); returns its length."""
        message = text.rstrip("\n")
        if message:
            error_log.error("%s", message)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        """Write each of `lines`."""
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Records are written as they come: nothing is held back."""
