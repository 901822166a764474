"""A request body handed to the handler as a stream of pieces (large or chunked bodies)."""

from __future__ import annotations

from collections.abc import Generator, Iterator

from socketify.core.errors import HTTPError
from socketify.protocol.http11 import ParseError

__all__ = ["BodyReader"]


class BodyReader:
    """Hands the body pieces to the request once; after the handler, drains or gives up."""

    __slots__ = ("_pieces", "done", "error")

    def __init__(self, pieces: Generator[bytes, None, None]) -> None:
        self._pieces = pieces
        self.done = False
        self.error: ParseError | None = None

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._pieces
        except ParseError as exc:
            # The handler sees an HTTPError (its chain unwinds as for any error); the
            # connection then refuses the request itself, with Connection: close.
            self.error = exc
            raise HTTPError(exc.status, exc.detail) from None
        self.done = True

    def finish(self, budget: int) -> bool:
        """Read what the handler left unread (up to `budget` bytes); False: close instead.

        A framing error found in the body, now or while the handler read it, is raised.
        """
        if self.error is not None:
            raise self.error
        if self.done:
            return True
        for piece in self._pieces:
            budget -= len(piece)
            if budget < 0:
                self._pieces.close()
                return False
        self.done = True
        return True
