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
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from socketify.tcp.errors import IdleTimeout, IncompleteRead, LineTooLong

__all__ = ["StreamConnection", "TlsInfo"]

RECV_SIZE = 65536


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
        """Close the connection (again is fine)."""
        if not self.closed:
            self.closed = True
            self._sock.close()

    def expire(self) -> None:
        """Close an idle connection: the read or write its handler waits in raises IdleTimeout."""
        if not self.closed:
            self.expired = True
            self.close()
