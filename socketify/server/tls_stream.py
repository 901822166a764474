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


def server_context(options: Any, http2: bool = False) -> ssl.SSLContext:
    """The SSLContext for TlsOptions (built in the worker, after gevent patched `ssl`);
    `http2` lets ALPN choose h2."""
    context: ssl.SSLContext = options.build_context(http2)
    return context


class TlsStream:
    """A server-side TLS session on an accepted non-blocking socket."""

    __slots__ = ("_incoming", "_obj", "_outgoing", "_raw", "family", "handshaken", "unsent")

    def __init__(self, context: ssl.SSLContext, raw: Any, received: bytes = b"") -> None:
        # `received`: ciphertext already read off `raw` (it came with a PROXY header).
        self._raw = raw
        self.family = raw.family
        self._incoming = ssl.MemoryBIO()
        if received:
            self._incoming.write(received)
        self._outgoing = ssl.MemoryBIO()
        self._obj = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self.unsent: bytes | memoryview = b""  # ciphertext the kernel has not taken yet
        self.handshaken = False  # until then, closing sends nothing

    # -- moving ciphertext ----------------------------------------------------------------

    def flush(self) -> bool:
        """Send pending ciphertext; True when nothing is left unsent."""
        data = self.unsent
        if self._outgoing.pending:
            fresh = self._outgoing.read()
            data = bytes(data) + fresh if data else fresh
        while data:
            try:
                sent = self._raw.send(data)
            except BlockingIOError:
                self.unsent = data
                return False
            # PERF: a partial send leaves a view, not a copy: slicing bytes made a large body
            # sent to a slow reader cost copying its rest again on every wake-up (quadratic).
            data = memoryview(data)[sent:] if sent < len(data) else b""
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
            except ssl.SSLError:
                # Hand the client the alert OpenSSL wrote (e.g. "certificate required"), so
                # it can say why instead of reporting a bare EOF; one try, no waiting.
                try:
                    self.flush()
                except OSError:
                    pass
                raise
            self.handshaken = True
            return 0 if self.flush() else 2

    @property
    def buffered(self) -> bool:
        """Whether decrypted or received-but-undecrypted bytes are waiting to be read."""
        return bool(self._obj.pending() or self._incoming.pending)

    def recv(self, size: int) -> bytes:
        """Decrypted bytes; b"" on close; BlockingIOError when nothing is ready."""
        obj = self._obj
        if not self._incoming.pending and not obj.pending():
            # PERF: with nothing buffered the read below could only fail with
            # SSLWantReadError; raising and catching that costs more than decrypting /ping.
            self._fill()
        while True:
            try:
                return obj.read(size)
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
    def server_name(self) -> str | None:
        """The SNI name the client sent, once the handshake is done (None without one)."""
        name = getattr(self._obj, "server_name", None)
        return name if isinstance(name, str) else None

    @property
    def alpn_protocol(self) -> str | None:
        """The negotiated ALPN protocol, if any."""
        return self._obj.selected_alpn_protocol()

    def getsockopt(self, level: int, option: int, size: int) -> bytes:
        """The socket's option (the byte counters of `TCP_INFO`, for the metrics)."""
        value: bytes = self._raw.getsockopt(level, option, size)
        return value

    def fileno(self) -> int:
        """The socket's file descriptor (for the libev watchers)."""
        return int(self._raw.fileno())

    def shutdown(self, how: int) -> None:
        """Send close_notify, then shut down the socket."""
        self.notify_close()
        self._raw.shutdown(how)

    def close(self) -> None:
        """Send close_notify (best effort), then close the socket."""
        self.notify_close()
        self._raw.close()

    def notify_close(self) -> None:
        """Send close_notify once (best effort, no waiting); the socket stays open."""
        # Without close_notify a client cannot tell our close from a truncation attack, and
        # strict ones (OpenSSL 3) report an error on a close-delimited body. One
        # non-blocking try: a peer that is gone or not reading must not hold us.
        if not self.handshaken:
            return
        self.handshaken = False  # once, even if close() follows shutdown()
        try:
            self._obj.unwrap()
        except ssl.SSLError:
            pass  # usually SSLWantReadError: ours is written; we do not wait for theirs
        try:
            self.flush()
        except OSError:
            pass
