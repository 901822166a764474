"""TLS over the connection's raw non-blocking socket, with the same recv/send contract.

The connection code waits on libev watchers itself and only understands `BlockingIOError`.
`TlsStream` wraps a non-blocking `ssl.SSLSocket` (the stdlib's, not gevent's cooperative
one) and maps OpenSSL's "want read"/"want write" onto that contract: a read that needs more
records raises BlockingIOError (wait readable); a write the kernel cannot take yet raises
BlockingIOError (wait writable). TLS 1.3 never renegotiates, so a read needing a write (or the
reverse) is limited to rare post-handshake messages; those retry on the next readiness.
"""

from __future__ import annotations

import ssl
from typing import Any

from gevent import monkey

# The original classes: gevent's patched ones would wait on the hub themselves.
_SSLContext: Any = monkey.get_original("ssl", "SSLContext")
_socket_class: Any = monkey.get_original("socket", "socket")

__all__ = ["TlsStream", "server_context"]


def server_context(options: Any) -> ssl.SSLContext:
    """Build the SSLContext from TlsOptions using the unpatched stdlib class."""
    context: ssl.SSLContext = options.build_context(_SSLContext)
    return context


class TlsStream:
    """A server-side TLS session on an accepted socket, non-blocking."""

    __slots__ = ("_sock", "family")

    def __init__(self, context: ssl.SSLContext, raw: Any) -> None:
        self.family = raw.family
        plain = _socket_class(raw.family, raw.type, raw.proto, raw.detach())
        plain.setblocking(False)
        self._sock = context.wrap_socket(
            plain, server_side=True, do_handshake_on_connect=False, suppress_ragged_eofs=True
        )

    def handshake_step(self) -> int:
        """Advance the handshake: 0 when done, 1 to wait readable, 2 to wait writable."""
        try:
            self._sock.do_handshake()
        except ssl.SSLWantReadError:
            return 1
        except ssl.SSLWantWriteError:
            return 2
        return 0

    def recv(self, size: int) -> bytes:
        """Decrypted bytes; b"" on close; BlockingIOError when nothing is ready."""
        try:
            return self._sock.recv(size)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise BlockingIOError from None
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            return b""
        except ssl.SSLError as exc:
            raise ConnectionResetError(str(exc)) from None

    def send(self, data: bytes | memoryview) -> int:
        """Encrypt and send; BlockingIOError when the kernel buffer is full."""
        try:
            return self._sock.send(data)
        except (ssl.SSLWantWriteError, ssl.SSLWantReadError):
            raise BlockingIOError from None
        except ssl.SSLError as exc:
            raise BrokenPipeError(str(exc)) from None

    @property
    def alpn_protocol(self) -> str | None:
        """The negotiated ALPN protocol, if any."""
        return self._sock.selected_alpn_protocol()

    def peer_certificate(self) -> dict[str, Any] | None:
        """The verified client certificate (mTLS), as `ssl.getpeercert()` gives it."""
        return self._sock.getpeercert() or None

    def fileno(self) -> int:
        """The socket's file descriptor (for the libev watchers)."""
        return self._sock.fileno()

    def shutdown(self, how: int) -> None:
        """Shut down the underlying socket (no TLS close_notify: we are closing anyway)."""
        self._sock.shutdown(how)

    def close(self) -> None:
        """Close the TLS session and the socket."""
        self._sock.close()


def is_tls(sock: object) -> bool:
    """Whether a connection socket speaks TLS (sendfile cannot be used then)."""
    return isinstance(sock, TlsStream)
