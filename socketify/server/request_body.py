"""The body of the request being answered, read from the connection only when the app asks.

Theory of operation. Every request with a body reaches the app with a `RequestBody` (the
request's `BodyStream`) of which not a byte has been read yet: middleware such as
`body_limit` can refuse it from Content-Length alone, and a client that sent
`Expect: 100-continue` is told to go ahead only when the app first reads. Pieces come straight
from the parser's buffer while it has them (no IO, no hub switch); only when the parser needs
more bytes does the body call its `wait` function, which the owner (the connection, or
`TestClient`) supplies.

After the app has answered, `settle` decides what becomes of what it left unread: nothing
(None: it read everything, or the rest was already buffered and is dropped), `DRAIN` (read
and drop the rest after answering, then keep the connection), or `CLOSE` (answer with
`Connection: close` and stop reading). A body answered with 413 is never read further, and
neither is one larger than `DRAIN_BUDGET` or one whose client may still be holding it back
for a `100 Continue` we never sent. A framing error met
in the body, while the app read it or while settling, is raised by `settle` so that the
owner answers it instead of the app's answer.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from socketify.core.body_stream import BodyStream
from socketify.core.errors import HTTPError
from socketify.protocol.http11 import (
    END_OF_MESSAGE,
    NEED_DATA,
    ParseError,
    RequestHead,
    ServerConnection,
)

__all__ = ["DRAIN_BUDGET", "RequestBody", "Unread"]

# Unread body bytes we read and drop to keep a connection, as Go's net/http does; past this
# a close is cheaper than reading what nobody wants.
DRAIN_BUDGET = 256 * 1024


class Unread(enum.Enum):
    """What becomes of the part of a body the app did not read."""

    DRAIN = "drain"  # read and drop it after the answer, then keep the connection
    CLOSE = "close"  # answer with Connection: close and never read it


class RequestBody(BodyStream):
    """The body of one request, its pieces pulled from `conn` as the app reads them."""

    __slots__ = ("_budget", "_conn", "_over", "_wait", "done", "error", "head")

    def __init__(
        self, conn: ServerConnection, head: RequestHead, wait: Callable[[RequestBody], object]
    ) -> None:
        super().__init__(expected=head.content_length)
        self._conn = conn
        self._wait = wait  # called when the parser needs more bytes; receives them
        self.head = head
        self.done = False  # the end of the body was read
        self.error: ParseError | None = None  # the framing error met in the body
        self._over = False  # the request was answered: the app may read no more
        self._budget = DRAIN_BUDGET

    def next_piece(self) -> bytes:
        """The next piece, waiting for the client if it has not arrived; b"" at the end."""
        if self._over:
            raise RuntimeError("the request was answered; its body can no longer be read")
        if self.error is not None:
            raise HTTPError(self.error.status, self.error.detail)
        if self.done:
            return b""
        conn = self._conn
        try:
            while (event := conn.next_event()) is NEED_DATA:
                self._wait(self)
        except ParseError as exc:
            # The app sees an HTTPError (its chain unwinds as for any error); `settle` then
            # hands the ParseError to the owner, which answers it and closes.
            self.error = exc
            raise HTTPError(exc.status, exc.detail) from None
        if event is END_OF_MESSAGE:
            self.done = True
            self.trailers = conn.trailers
            return b""
        assert isinstance(event, bytes)
        return event

    def settle(self, status: int) -> Unread | None:
        """After the app answered with `status`: what becomes of the unread rest, if any.

        What is already buffered is dropped now, without IO. Raises the body's ParseError,
        if there is one (met now or while the app read).
        """
        self._over = True
        if self.error is not None:
            raise self.error
        if self.done:
            return None
        if status == 413:
            return Unread.CLOSE  # a body refused as too large is never read
        if self.discard(None):
            return None
        expected = self.head.content_length
        if self._budget < 0 or (expected is not None and expected - self.received > self._budget):
            return Unread.CLOSE
        if self.head.expect_continue and not self._conn.continued:
            return Unread.CLOSE  # the client may be holding the body back for our 100
        return Unread.DRAIN

    def discard(self, wait: Callable[[], object] | None) -> bool:
        """Read and drop the rest within the drain budget; True once the end was reached.

        With `wait` None only what is already buffered is dropped. May raise ParseError.
        """
        conn = self._conn
        while True:
            event = conn.next_event()
            if event is END_OF_MESSAGE:
                self.done = True
                return True
            if event is NEED_DATA:
                if wait is None:
                    return False
                wait()
            else:
                assert isinstance(event, bytes)
                self.received += len(event)
                self._budget -= len(event)
                if self._budget < 0:
                    return False
