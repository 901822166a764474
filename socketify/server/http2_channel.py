"""An upgraded HTTP/2 stream, seen through the part of a `Connection` that `server.upgraded` uses.

Theory of operation. SSE (`EventStream.serve`) takes over a connection through a few names:
`Outbound` writes with `sock.send` (never waits; takes what it can) and `send` (parks the
writer), `read_some` reads with `http.buffered`, `sock.recv` and `wait_readable` and sees the
end as b"", `shutdown` ends it, and `service.stop_signal` says when a graceful stop begins.
`StreamChannel` gives the same names for one stream, so an event stream keeps its bounded
backlog over HTTP/2: `sock.send` takes only what the stream's window and the session's
socket backlog allow now, so what a slow client has not read waits in the `Outbound` queue,
where `max_backpressure` sees it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from socketify.protocol.http2 import StreamClosed
from socketify.server.errors import PeerGone

if TYPE_CHECKING:
    from socketify.server.http2_stream import Stream

__all__ = ["StreamChannel"]


class _Socket:
    """The socket side of a `StreamChannel`: non-blocking writes into the stream."""

    __slots__ = ("_stream",)

    unsent = b""  # no TLS layer of its own: the connection's session writes the frames
    buffered = False

    def __init__(self, stream: Stream) -> None:
        self._stream = stream

    def send(self, data: bytes | memoryview) -> int:
        """What the stream took now; BlockingIOError when it can take nothing yet."""
        return self._stream.offer(data)

    def recv(self, size: int) -> bytes:
        """b"" once the stream is over; an upgraded HTTP/2 stream carries nothing to read."""
        if self._stream.input_closed:
            return b""
        raise BlockingIOError

    def shutdown(self, how: int) -> None:
        """End the stream."""
        self._stream.shut_down()


class StreamChannel:
    """An HTTP/2 stream with the part of a `Connection`'s surface `server.upgraded` uses."""

    __slots__ = ("_stream", "deadline", "http", "service", "sock")

    scheme = "h2"  # not "https": the session, not this channel, drains the TLS layer
    buffered = 0  # no bytes of an earlier protocol are waiting (read_some asks `http`)

    def __init__(self, stream: Stream) -> None:
        self._stream = stream
        self.sock = _Socket(stream)
        self.http = self
        self.deadline: float | None = None
        self.service = stream.session.conn.service  # the HTTP service the connection is of

    def take_buffered(self) -> bytes:
        """Nothing: an HTTP/2 stream starts with no leftover bytes."""
        return b""

    def send(self, data: bytes | memoryview) -> None:
        """Write all of `data`, parking the caller for window; PeerGone if the stream ended."""
        if self._stream.input_closed:
            raise PeerGone("stream closed")
        try:
            self._stream.send_all(data)
        except StreamClosed as exc:
            raise PeerGone(exc) from None

    def wait_readable(self) -> None:
        """Park until the stream is over."""
        self._stream.wait_input()
