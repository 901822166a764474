"""Writing to and reading from a connection after `res.upgrade` took it over (SSE, Pulse).

Theory of operation. Once upgraded, the connection greenlet only reads (it is the one that
notices the peer leaving), while any greenlet of the worker may write. `Outbound` makes the
writes safe without ever parking the caller: a send first tries the socket directly (the
common case costs one syscall and no switch); whatever the kernel does not take goes into a
FIFO that one flusher greenlet drains, and later sends queue behind it, so bytes of two
senders never interleave and arrive in the order they were handed over. A hub fan-out to a
thousand members therefore never waits for the slowest one; `pending` shows the backlog.

`send_soon` is the broadcast variant: the bytes wait (corked) until the current turn of the
event loop ends, so every frame a burst of broadcasts hands to one member in that turn goes
out in one write. A thousand members and twenty queued broadcasts then cost a thousand
syscalls instead of twenty thousand; later `send`s queue behind the corked bytes.
"""

from __future__ import annotations

import socket
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gevent

from socketify.server.connection import READ_SIZE, PeerGone

if TYPE_CHECKING:
    from socketify.server.connection import Connection

__all__ = ["Outbound", "read_some"]


class Outbound:
    """The write side of an upgraded connection: non-blocking sends, one flusher, FIFO order."""

    __slots__ = ("_conn", "_corked", "_flusher", "_queue", "closed", "on_drain", "pending")

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._queue: deque[bytes] = deque()
        self._flusher: Any = None
        self._corked = False  # bytes in the queue wait for the end of this loop turn
        self.pending = 0  # bytes handed to us that the kernel has not taken yet
        self.closed = False
        self.on_drain: Callable[[], None] | None = None  # called when a backlog is gone

    def send(self, data: bytes) -> bool:
        """Write `data` after everything sent before it; False once the connection is dead."""
        if self.closed:
            return False
        if self._flusher is not None or self._corked:
            self._queue.append(data)
            self.pending += len(data)
            return True
        return self._write(data)

    def send_soon(self, data: bytes) -> bool:
        """`send`, but written when this loop turn ends, with the rest sent to us meanwhile."""
        if self.closed:
            return False
        self._queue.append(data)
        self.pending += len(data)
        if self._flusher is None and not self._corked:
            self._corked = True
            gevent.get_hub().loop.run_callback(self._uncork)
        return True

    def _uncork(self) -> None:
        self._corked = False
        queue = self._queue
        if self.closed or self._flusher is not None or not queue:
            return  # gone, or a flusher (which drains the queue) took over meanwhile
        data = queue[0] if len(queue) == 1 else b"".join(queue)
        queue.clear()
        self.pending -= len(data)
        if not self._write(data):
            shutdown(self._conn)  # the reading greenlet sees EOF and ends the connection

    def _write(self, data: bytes) -> bool:
        """Try the socket now; queue what the kernel does not take behind a new flusher."""
        sock = self._conn.sock
        try:
            sent = sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.closed = True
            return False
        tls_unsent = self._conn.scheme == "https" and bool(sock.unsent)
        if sent < len(data) or tls_unsent:
            rest = data[sent:]
            self._queue.append(rest)  # may be b"": the flusher then only drains the TLS layer
            self.pending += len(rest)
            self._flusher = gevent.spawn(self._flush)
        return True

    def _flush(self) -> None:
        conn = self._conn
        queue = self._queue
        try:
            while queue:
                data = queue.popleft()
                conn._send(data)  # parks only this greenlet while the kernel buffer is full
                self.pending -= len(data)
                # A blocked send arms the stalled-reader deadline; it is over now.
                conn.deadline = None
        except (PeerGone, OSError):
            self.closed = True
            queue.clear()
            self.pending = 0
        finally:
            self._flusher = None
        if not self.closed and self.on_drain is not None:
            self.on_drain()

    @property
    def backlog(self) -> int:
        """Bytes the kernel refused, waiting for the flusher (corked bytes are not refused)."""
        # While corked there is no flusher, so everything pending is corked.
        return 0 if self._corked else self.pending

    @property
    def flushing(self) -> bool:
        """True while a backlog is being written."""
        return self._flusher is not None

    def wait_flushed(self, timeout: float) -> bool:
        """Park the caller until the backlog is written (or `timeout`); True if it was."""
        if self._corked:
            self._uncork()  # now, not at the end of the turn: the caller is about to close
        flusher = self._flusher
        if flusher is not None and flusher is not gevent.getcurrent():
            flusher.join(timeout)
        return self._flusher is None

    def abort(self) -> None:
        """Stop writing for good; called by the connection greenlet before the socket closes."""
        self.closed = True
        flusher = self._flusher
        if flusher is not None and flusher is not gevent.getcurrent():
            # Kill and wait: its watcher must be released before the connection closes it.
            flusher.kill(block=True, timeout=1.0)
        self._queue.clear()
        self.pending = 0


def read_some(conn: Connection, wait_first: bool = False) -> bytes:
    """The next bytes from the peer (b"" on EOF or error), parking the caller until some come.

    Bytes the HTTP parser already buffered (sent right behind the upgrade request) come first.
    `wait_first` skips the first `recv` when the caller expects nothing to be there yet.
    """
    parser = conn.parser
    if parser.buffered:
        data = bytes(parser.input)
        parser.input.clear()
        return data
    sock = conn.sock
    if wait_first and not (conn.scheme == "https" and sock.buffered):
        # PERF: a peer that has been answered usually waits for the answer before sending
        # more (request/response, ping-pong), so a recv now would be a wasted EAGAIN (and a
        # raised BlockingIOError); the read watcher is level-triggered, so waiting first
        # returns at once when bytes are in fact already there.
        conn._wait_readable()
    while True:
        try:
            return sock.recv(READ_SIZE)
        except BlockingIOError:
            conn._wait_readable()
        except OSError:
            return b""


def shutdown(conn: Connection, how: int = socket.SHUT_RDWR) -> None:
    """Shut the socket down so the reading greenlet wakes up with EOF; errors mean it is gone."""
    try:
        conn.sock.shutdown(how)
    except OSError:
        pass


def linger(conn: Connection, seconds: float) -> None:
    """Half-close and drain input for up to `seconds`, so our last frame is not reset."""
    shutdown(conn, socket.SHUT_WR)
    end = time.monotonic() + seconds
    with gevent.Timeout(seconds, False):
        while time.monotonic() < end and read_some(conn):
            pass
