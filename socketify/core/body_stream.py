"""`BodyStream`: a request body that is still arriving, read once, with a size limit.

Theory of operation. A connection may hand `Request` an iterator of body pieces instead of the
whole body, so that a large upload never sits in memory at once: `req.iter_body()` passes the
pieces on as they arrive (the multipart parser spills them to temporary files), while
`req.body` reads everything on first use for handlers that want bytes. A limit set before the
first read (`body_limit`) is enforced up front from Content-Length, and for a chunked body
while it streams: the piece that crosses it raises `HTTPError(413)`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from socketify.core.errors import HTTPError

__all__ = ["PAYLOAD_TOO_LARGE", "BodyStream"]

PAYLOAD_TOO_LARGE = "Payload Too Large"


class BodyStream:
    """An iterable of body pieces that can be consumed once, optionally capped in size."""

    __slots__ = ("_consumed", "_limit", "_source", "expected", "received")

    def __init__(self, source: Iterable[bytes], expected: int | None = None) -> None:
        self._source = source
        self._limit: int | None = None
        self._consumed = False
        self.expected = expected  # the Content-Length, or None for a chunked body
        self.received = 0

    @property
    def consumed(self) -> bool:
        """True once reading has started; the pieces cannot be read a second time."""
        return self._consumed

    def limit(self, max_bytes: int) -> None:
        """Refuse a body over `max_bytes` with 413: now from Content-Length, else while read."""
        if self.expected is not None and self.expected > max_bytes:
            raise HTTPError(413, PAYLOAD_TOO_LARGE)
        if self._limit is None or max_bytes < self._limit:
            self._limit = max_bytes

    def __iter__(self) -> Iterator[bytes]:
        if self._consumed:
            raise RuntimeError("the request body was already read as a stream")
        self._consumed = True
        return self._pieces()

    def _pieces(self) -> Iterator[bytes]:
        limit = self._limit
        for piece in self._source:
            if not piece:
                continue
            self.received += len(piece)
            if limit is not None and self.received > limit:
                raise HTTPError(413, PAYLOAD_TOO_LARGE)
            yield piece

    def read_all(self) -> bytes:
        """Read the rest of the body into one bytes object."""
        return b"".join(self)
