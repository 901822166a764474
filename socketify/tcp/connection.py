"""`StreamConnection`: blocking-style reads and writes on one accepted stream socket.

It only calls the socket's `recv`, `sendall` and `close`, so it works on any socket object: a
gevent socket in a worker (where "blocking" yields to the hub), or a plain blocking socket in
a test. Bytes read ahead by `readline` or `recv_exactly` wait in a private buffer that every
read drains first.

A server that shares its process with other connections passes `between_reads`, called
before each read the handler makes: a peer whose bytes are always there never makes a read
wait, so that is where the server lets the others run.

Idle time is tracked, not timed: every read or write that completes stamps `last_active`, and
the server's sweeper calls `expire()` on a connection idle for too long. That closes the
socket, and the read or write the handler is blocked in raises `IdleTimeout`.
PERF: a socket timeout would start and stop a libev timer around every wait instead.

A graceful stop (or the old workers' part of a reload) is announced, not imposed: `stopping`
turns True, `wait_stop` returns, and the `on_stop` callbacks run, each in a greenlet of its
own, while the handler carries on. A callback may say goodbye and `close()` the connection:
a read the handler is blocked in then ends as the end of the stream. A handler that ignores
the stop is closed when the service's `graceful_timeout` runs out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from socketify.tcp.errors import IdleTimeout, IncompleteRead, LineTooLong

__all__ = ["StopNotice", "StreamConnection", "TlsInfo"]

RECV_SIZE = 65536


class StopNotice(Protocol):
    """How the server announces a graceful stop (`server.stop_signal.StopSignal`)."""

    @property
    def is_set(self) -> bool:
        """True once the stop has begun."""

    def wait(self, timeout: float | None = None) -> bool:
        """Park until the stop begins (or `timeout`); True if it has."""

    def subscribe(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Run `callback()` when the stop begins; returns the unsubscriber."""


class _NeverStops:
    """The notice of a connection no server stops (one made by hand, e.g. in a test)."""

    is_set = False

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is None:
            raise ValueError("nothing will ever stop this connection: give a timeout")
        time.sleep(timeout)
        return False

    def subscribe(self, callback: Callable[[], object]) -> Callable[[], None]:
        return _nothing


def _nothing() -> None:
    """Unsubscribes nothing."""


@dataclass(frozen=True)
class TlsInfo:
    """What the TLS handshake settled: protocol version, cipher, ALPN and client certificate."""

    version: str | None
    cipher: str | None
    alpn_protocol: str | None
    peer_certificate: dict[str, Any] | None

    @classmethod
    def of(cls, sock: Any) -> TlsInfo:
        """The session of a handshaken `ssl.SSLSocket` (or gevent's)."""
        cipher = sock.cipher()
        return cls(
            version=sock.version(),
            cipher=cipher[0] if cipher else None,
            alpn_protocol=sock.selected_alpn_protocol(),
            peer_certificate=sock.getpeercert() or None,
        )


class StreamConnection:
    """One client's byte stream, as a service handler sees it."""

    __slots__ = (
        "_between_reads",
        "_buffer",
        "_sock",
        "_stop",
        "_unsubscribers",
        "closed",
        "expired",
        "last_active",
        "local",
        "max_line",
        "peer",
        "tls",
    )

    def __init__(
        self,
        sock: Any,
        peer: Any,
        *,
        local: Any = None,
        max_line: int = 65536,
        tls: TlsInfo | None = None,
        stop: StopNotice | None = None,
        between_reads: Callable[[], None] | None = None,
    ) -> None:
        self._sock = sock
        self._between_reads = between_reads
        self._buffer = bytearray()
        self.peer = peer  # (host, port) for TCP, the socket path's peer name ("") for Unix
        self.local = local
        self.max_line = max_line  # readline's default bound, from the service's options
        self.tls = tls  # None on a plain connection
        self.closed = False
        self.expired = False  # closed by the server for idling
        self.last_active = time.monotonic()  # when a read or write last completed
        self._stop: StopNotice = stop if stop is not None else _NeverStops()
        self._unsubscribers: list[Callable[[], None]] = []

    def __repr__(self) -> str:
        return f"<StreamConnection peer={self.peer!r}{' tls' if self.tls else ''}>"

    # -- reading ------------------------------------------------------------------------------

    def recv(self, max_bytes: int = RECV_SIZE) -> bytes:
        """Up to `max_bytes` bytes as soon as any are there; b"" once the peer has closed."""
        if self._between_reads is not None:
            self._between_reads()
        buffer = self._buffer
        if buffer:
            ahead = bytes(buffer[:max_bytes])
            del buffer[:max_bytes]
            return ahead
        return self._read(max_bytes)

    def recv_exactly(self, size: int) -> bytes:
        """Exactly `size` bytes; `IncompleteRead` if the peer closes first."""
        if self._between_reads is not None:
            self._between_reads()
        buffer = self._buffer
        while len(buffer) < size:
            data = self._read(max(RECV_SIZE, size - len(buffer)))
            if not data:
                partial = bytes(buffer)
                buffer.clear()
                raise IncompleteRead(partial, size)
            buffer += data
        data = bytes(buffer[:size])
        del buffer[:size]
        return data

    def readline(self, max_line: int | None = None) -> bytes:
        """The next line with its b"\\n"; at end of stream the unterminated rest, then b"".

        `LineTooLong` when the line (newline included) would exceed `max_line` bytes (default:
        the service's `max_line`); the connection cannot be read further after that.
        """
        if self._between_reads is not None:
            self._between_reads()
        limit = self.max_line if max_line is None else max_line
        buffer = self._buffer
        searched = 0
        while True:
            end = buffer.find(b"\n", searched)
            if end >= 0:
                if end >= limit:
                    raise LineTooLong(limit)
                line = bytes(buffer[: end + 1])
                del buffer[: end + 1]
                return line
            if len(buffer) >= limit:
                raise LineTooLong(limit)
            searched = len(buffer)
            data = self._read(RECV_SIZE)
            if not data:
                line = bytes(buffer)
                buffer.clear()
                return line
            if not buffer:
                # PERF: a whole line in one read (the common case) skips the buffer copy.
                end = data.find(b"\n")
                if end == len(data) - 1 and end < limit:
                    return data
            buffer += data

    def _read(self, size: int) -> bytes:
        try:
            data: bytes = self._sock.recv(size)
        except OSError:
            if self.expired:
                raise IdleTimeout from None
            if self.closed:
                return b""  # closed on our side (an `on_stop` goodbye): the stream ends
            raise
        self.last_active = time.monotonic()
        return data

    # -- writing ------------------------------------------------------------------------------

    def send(self, data: bytes | bytearray | memoryview) -> None:
        """Send all of `data`, waiting while the peer is slow to read."""
        try:
            self._sock.sendall(data)
        except OSError:
            if self.expired:
                raise IdleTimeout from None
            raise
        self.last_active = time.monotonic()

    def close(self) -> None:
        """Close the connection (again is fine); a read blocked on it ends the stream."""
        if not self.closed:
            self.closed = True
            for unsubscribe in self._unsubscribers:
                unsubscribe()
            self._unsubscribers.clear()
            self._sock.close()

    # -- the server stopping ------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """True once the server began a graceful stop or reload: time to wind down."""
        return self._stop.is_set

    def wait_stop(self, timeout: float | None = None) -> bool:
        """Park the caller until the server begins a graceful stop (or `timeout`); True if so."""
        return self._stop.wait(timeout)

    def on_stop(self, fn: Callable[[StreamConnection], Any]) -> None:
        """Call `fn(conn)` in a greenlet of its own when a graceful stop or reload begins.

        At once if it has begun; never once the connection is closed. The place to send a
        goodbye and `close()`: the handler's pending read then sees the end of the stream.
        """
        if not self.closed:
            self._unsubscribers.append(self._stop.subscribe(lambda: fn(self)))

    def expire(self) -> None:
        """Close an idle connection: the read or write its handler waits in raises IdleTimeout."""
        if not self.closed:
            self.expired = True
            self.close()
