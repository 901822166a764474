"""`BodyStream`: a request body that is still arriving, read once, with a size limit.

Theory of operation. A connection may hand `Request` a body that has not been read yet, so
that a large upload never sits in memory at once and an unwanted one is never read at all:
`req.iter_body()` passes the pieces on as they arrive (the multipart parser spills them to
temporary files), while `req.body` reads everything on first use for handlers that want
bytes. The pieces come from an iterable, or from `next_piece`, which a subclass overrides to
pull them from its own source (the connection's `RequestBody` reads its parser). A limit set
before the first read (`body_limit`) is enforced up front from Content-Length, and for a
chunked body while it streams: the piece that crosses it raises `HTTPError(413)`.

Some bodies end with trailer fields (a chunked HTTP/1.1 body, an HTTP/2 stream): `trailers`
is None until the end of the body has been read, then the `(lower-case name, value)` pairs
that came after it (none for most bodies). A subclass that meets trailers sets them when it
reads the end.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from socketify.core.errors import HTTPError

__all__ = ["PAYLOAD_TOO_LARGE", "BodyStream"]

PAYLOAD_TOO_LARGE = "Payload Too Large"


class BodyStream:
    """Body pieces that can be consumed once, optionally capped in size."""

    __slots__ = ("_consumed", "_limit", "_source", "expected", "received", "trailers")

    def __init__(self, source: Iterable[bytes] = (), expected: int | None = None) -> None:
        self._source = iter(source)
        self._limit: int | None = None
        self._consumed = False
        self.expected = expected  # the Content-Length, or None for a chunked body
        self.received = 0
        # The trailer fields, once the end was read (None before: they follow the body).
        self.trailers: tuple[tuple[str, str], ...] | None = None

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

    def next_piece(self) -> bytes:
        """The next non-empty piece of the body, or b"" at its end."""
        for piece in self._source:
            if piece:
                return piece
        return b""

    def __iter__(self) -> Iterator[bytes]:
        if self._consumed:
            raise RuntimeError("the request body was already read as a stream")
        self._consumed = True
        return self._pieces()

    def _pieces(self) -> Iterator[bytes]:
        next_piece = self.next_piece
        while piece := next_piece():
            yield self._counted(piece)
        if self.trailers is None:
            self.trailers = ()

    def read_all(self) -> bytes:
        """Read the rest of the body into one bytes object."""
        return b"".join(self)

    def _counted(self, piece: bytes) -> bytes:
        """`piece`, after counting it against the limit."""
        self.received += len(piece)
        if self._limit is not None and self.received > self._limit:
            raise HTTPError(413, PAYLOAD_TOO_LARGE)
        return piece
