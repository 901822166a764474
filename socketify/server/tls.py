"""TLS for the connection's raw non-blocking socket, with the same recv/send contract.

The connection code waits on libev watchers itself and only understands `BlockingIOError`.
`TlsStream` runs an `ssl.SSLObject` over memory BIOs and moves ciphertext between them and
the raw socket: a read that needs more records raises BlockingIOError (wait readable), a
write whose ciphertext the kernel cannot take yet keeps it in `unsent` and raises
BlockingIOError on the next write (wait writable). Plaintext already decrypted but not yet
read shows in `buffered`, so the connection never waits on the socket for data it has.
"""

from __future__ import annotations

import ssl
from typing import Any

__all__ = ["TlsStream", "server_context"]

_RECORD_READ = 65536


def server_context(options: Any) -> ssl.SSLContext:
    """The SSLContext for TlsOptions (built in the worker, after gevent patched `ssl`)."""
    context: ssl.SSLContext = options.build_context()
    return context


class TlsStream:
    """A server-side TLS session on an accepted non-blocking socket."""

    __slots__ = ("_incoming", "_obj", "_outgoing", "_raw", "family", "unsent")

    def __init__(self, context: ssl.SSLContext, raw: Any) -> None:
        self._raw = raw
        self.family = raw.family
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._obj = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self.unsent = b""  # ciphertext the kernel has not taken yet

    # -- moving ciphertext ----------------------------------------------------------------

    def flush(self) -> bool:
        """Send pending ciphertext; True when nothing is left unsent."""
        data = self.unsent + self._outgoing.read() if self._outgoing.pending else self.unsent
        while data:
            try:
                sent = self._raw.send(data)
            except BlockingIOError:
                self.unsent = data
                return False
            data = data[sent:]
        self.unsent = b""
        return True

    def _fill(self) -> None:
        """Move one read of ciphertext into the TLS object; BlockingIOError if none came."""
        data = self._raw.recv(_RECORD_READ)
        if data:
            self._incoming.write(data)
        else:
            self._incoming.write_eof()

    # -- the connection's contract ------------------------------------------------------------

    def handshake_step(self) -> int:
        """Advance the handshake: 0 when done, 1 to wait readable, 2 to wait writable."""
        while True:
            try:
                self._obj.do_handshake()
            except ssl.SSLWantReadError:
                if not self.flush():
                    return 2
                try:
                    self._fill()
                except BlockingIOError:
                    return 1
                continue
            return 0 if self.flush() else 2

    @property
    def buffered(self) -> bool:
        """Whether decrypted or received-but-undecrypted bytes are waiting to be read."""
        return bool(self._obj.pending() or self._incoming.pending)

    def recv(self, size: int) -> bytes:
        """Decrypted bytes; b"" on close; BlockingIOError when nothing is ready."""
        while True:
            try:
                return self._obj.read(size)
            except ssl.SSLWantReadError:
                self.flush()  # e.g. a TLS 1.3 key update to answer
                self._fill()
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b""
            except ssl.SSLError as exc:
                raise ConnectionResetError(str(exc)) from None

    def send(self, data: bytes | memoryview) -> int:
        """Encrypt `data`; BlockingIOError while earlier ciphertext is still unsent."""
        if (self.unsent or self._outgoing.pending) and not self.flush():
            raise BlockingIOError
        try:
            written = self._obj.write(data)
        except ssl.SSLError as exc:
            raise BrokenPipeError(str(exc)) from None
        self.flush()
        return written

    def peer_certificate(self) -> dict[str, Any] | None:
        """The verified client certificate (mTLS), as `getpeercert()` gives it."""
        return self._obj.getpeercert() or None

    @property
    def alpn_protocol(self) -> str | None:
        """The negotiated ALPN protocol, if any."""
        return self._obj.selected_alpn_protocol()

    def fileno(self) -> int:
        """The socket's file descriptor (for the libev watchers)."""
        return int(self._raw.fileno())

    def shutdown(self, how: int) -> None:
        """Shut down the socket (no close_notify: we are closing anyway)."""
        self._raw.shutdown(how)

    def close(self) -> None:
        """Close the socket."""
        self._raw.close()
