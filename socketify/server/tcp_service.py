"""The TCP service of one worker: accept loop, connection registry, cap, idle timeout, drain.

Theory of operation. As in the HTTP service, each listening socket gets a libev read watcher
that accepts every pending connection without blocking; each connection gets a greenlet that
runs the user's handler on a `StreamConnection` over a gevent socket. The connection stamps
each completed read and write; one sweeper greenlet expires connections idle for longer than
`idle_timeout`, and the read or write their handler waits in raises `IdleTimeout`. At
`max_connections` the watchers stop and new clients wait in the kernel's backlog.
`stop(graceful=True)` closes the listeners, lets running handlers finish for up to
`graceful_timeout`, then closes what is left (a handler blocked in a read gets an error).
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gevent
import gevent.event
from gevent import get_hub
from gevent import socket as green_socket

from socketify.protocol.proxy_header import (
    V1_MAX_LENGTH,
    V1_PREFIX,
    V2_SIGNATURE,
    ProxyHeader,
    ProxyHeaderError,
    parse_proxy_header,
)
from socketify.server.proxy_intake import ProxyIntake
from socketify.server.service import ACCEPT_PAUSE, accept_fd, plain_socket
from socketify.server.tls_stream import server_context
from socketify.server.turns import Turn
from socketify.tcp.connection import StreamConnection, TlsInfo
from socketify.tcp.errors import StreamError

if TYPE_CHECKING:
    from socketify.core.tls_options import TlsOptions
    from socketify.tcp.service import Service

__all__ = ["TcpService"]

log = logging.getLogger("socketify.error")

_ACCEPT_BATCH = 64  # accepts per readiness callback before others get a turn
SWEEP_INTERVAL = 0.25
_STOP_JOIN = 1.0  # after closing the leftovers, how long their handlers get to unwind


class TcpService:
    """Serves a `tcp.Service` on listening sockets inside one gevent worker process."""

    def __init__(
        self,
        service: Service,
        listeners: list[socket.socket],
        *,
        tls: TlsOptions | None = None,
        on_connection: Callable[[], Any] | None = None,
        proxy: ProxyIntake | None = None,
    ) -> None:
        self.service = service
        self.options = service.settings
        # Which binds expect a PROXY protocol header: the command line's, else the service's.
        self.proxy = proxy or ProxyIntake.build(
            self.options.proxy_protocol, self.options.proxy_allow
        )
        self.stopping = False
        # Each connection's greenlet -> its socket (the TLS one once the handshake wraps it).
        self.connections: dict[gevent.Greenlet, Any] = {}
        self.streams: dict[gevent.Greenlet, StreamConnection] = {}  # those past the handshake
        self._sweeper: gevent.Greenlet | None = None
        self._connection_done = on_connection
        self._given = list(listeners)
        self._listeners = [
            plain_socket(sock.family, sock.type, sock.proto, os.dup(sock.fileno()))
            for sock in listeners
        ]
        loop = get_hub().loop
        self._watchers = [loop.io(sock.fileno(), 1) for sock in self._listeners]
        self._paused = False
        self._drained = gevent.event.Event()
        self._drained.set()
        self._tls_context = server_context(tls) if tls is not None else None

    def start(self) -> None:
        """Begin accepting; returns at once (everything runs in greenlets)."""
        for watcher, sock in zip(self._watchers, self._listeners, strict=True):
            watcher.start(self._accept, sock)
        if self.options.idle_timeout is not None:
            self._sweeper = gevent.spawn(self._sweep, self.options.idle_timeout)

    # -- accepting ------------------------------------------------------------------------------

    def _accept(self, listener: Any) -> None:
        limit = self.options.max_connections
        for _ in range(_ACCEPT_BATCH):
            if len(self.connections) >= limit:
                self._pause()
                return
            try:
                fd, addr = accept_fd(listener)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log.warning("accept failed (%s); pausing accepts", exc.strerror)
                    self._pause(ACCEPT_PAUSE)
                elif exc.errno not in (errno.ECONNABORTED, errno.EPROTO, errno.EINTR):
                    log.error("accept failed: %s", exc)
                return
            sock = green_socket.socket(listener.family, listener.type, listener.proto, fileno=fd)
            proxied = self.proxy is not None and self.proxy.covers(listener.getsockname())
            greenlet = gevent.Greenlet(self._serve, sock, addr, proxied)
            self.connections[greenlet] = sock
            self._drained.clear()
            greenlet.start()

    def _serve(self, sock: Any, addr: Any, proxied: bool = False) -> None:
        options = self.options
        conn: StreamConnection | None = None
        greenlet = gevent.getcurrent()
        try:
            if sock.family != socket.AF_UNIX:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if proxied:
                addr = self._client_address(sock, addr)
                if addr is None:
                    return
            tls = None
            if self._tls_context is not None:
                sock.settimeout(options.handshake_timeout)
                sock = self._tls_context.wrap_socket(
                    sock, server_side=True, do_handshake_on_connect=False
                )
                self.connections[greenlet] = sock
                sock.do_handshake()
                sock.settimeout(None)
                tls = TlsInfo.of(sock)
            conn = StreamConnection(
                sock,
                addr,
                local=sock.getsockname(),
                max_line=options.max_line,
                tls=tls,
                between_reads=Turn().check,  # a flooding client takes turns with the others
            )
            self.streams[greenlet] = conn
            self.service.handler(conn)
        except TimeoutError:  # idle, or a TLS handshake or PROXY header not done in time
            log.debug("closing connection from %r: timed out", addr)
        except StreamError as exc:
            log.info("closing connection from %r: %s", addr, exc)
        except ssl.SSLError as exc:
            log.info("TLS failed on a connection from %r: %s", addr, exc)
        except OSError as exc:
            if not (self.stopping or isinstance(exc, ConnectionError)):
                log.info("connection from %r failed: %s", addr, exc)
        except Exception:
            log.exception("TCP handler %r failed on a connection from %r", self.service, addr)
        finally:
            if conn is not None:
                conn.close()
            else:
                sock.close()
            self._forget(greenlet)

    def _client_address(self, sock: Any, addr: Any) -> Any:
        """Read the PROXY header (within handshake_timeout): the client's address it names,
        the peer's own for a LOCAL or UNSPEC one, or None when the connection must close."""
        proxy = self.proxy
        assert proxy is not None
        peer = "unix" if sock.family == socket.AF_UNIX else addr[0]
        if not proxy.allows(peer):
            log.warning("closed a connection from %s: not allowed to send PROXY", peer)
            return None
        sock.settimeout(self.options.handshake_timeout)
        try:
            header = read_proxy_header(sock)
        except ProxyHeaderError as exc:
            log.warning("closed a connection from %s: %s", peer, exc)
            return None
        sock.settimeout(None)
        return header.source if header.source is not None else addr

    def _forget(self, greenlet: Any) -> None:
        self.connections.pop(greenlet, None)
        self.streams.pop(greenlet, None)
        if not self.connections:
            self._drained.set()
        if self._paused and len(self.connections) < self.options.max_connections:
            self._resume()
        if self._connection_done is not None:
            self._connection_done()

    def _pause(self, seconds: float | None = None) -> None:
        if self._paused:
            return
        self._paused = True
        for watcher in self._watchers:
            watcher.stop()
        if seconds is not None:
            get_hub().loop.timer(seconds).start(self._resume)

    def _resume(self) -> None:
        if not self._paused or self.stopping:
            return
        self._paused = False
        for watcher, sock in zip(self._watchers, self._listeners, strict=True):
            watcher.start(self._accept, sock)

    def _sweep(self, idle_timeout: float) -> None:
        while True:
            gevent.sleep(SWEEP_INTERVAL)
            stale = time.monotonic() - idle_timeout
            for conn in list(self.streams.values()):
                if conn.last_active < stale:
                    conn.expire()

    # -- stopping -------------------------------------------------------------------------------

    def stop_accepting(self) -> None:
        """Close the listeners; connections already accepted carry on."""
        if self.stopping:
            return
        self.stopping = True
        for watcher in self._watchers:
            watcher.close()
        # Every fd of this process on a listening socket keeps the kernel completing
        # handshakes into its queue; closing them all refuses new clients now.
        for sock in (*self._listeners, *self._given):
            sock.close()

    def stop(self, graceful: bool = True, timeout: float | None = None) -> None:
        """Stop accepting; with `graceful`, let handlers finish (up to the timeout) first."""
        self.stop_accepting()
        if graceful:
            wait = self.options.graceful_timeout if timeout is None else timeout
            self._drained.wait(wait)
        left = list(self.connections.items())
        for _, sock in left:
            sock.close()  # a handler blocked on it gets an error and unwinds
        greenlets = [greenlet for greenlet, _ in left]
        gevent.joinall(greenlets, timeout=_STOP_JOIN)
        gevent.killall([greenlet for greenlet in greenlets if not greenlet.dead], block=False)
        if self._sweeper is not None:
            self._sweeper.kill(block=False)


def read_proxy_header(sock: Any) -> ProxyHeader:
    """Read exactly one PROXY protocol header from a blocking (cooperative) socket.

    Exactly: the bytes after it are the service's own and stay in the socket for the TLS
    handshake or the handler, so the header is read by its length (version 2 states it) or
    up to its CRLF (version 1, found by peeking). ProxyHeaderError for anything else.
    """
    start = _recv_exactly(sock, len(V1_PREFIX))
    if V2_SIGNATURE.startswith(start):
        preamble = start + _recv_exactly(sock, 16 - len(start))
        data = preamble + _recv_exactly(sock, int.from_bytes(preamble[14:16], "big"))
    elif start == V1_PREFIX:
        data = start
        while not data.endswith(b"\n"):  # the parser refuses a bare LF
            if len(data) >= V1_MAX_LENGTH:
                raise ProxyHeaderError("PROXY v1 line longer than 107 bytes")
            ahead = sock.recv(V1_MAX_LENGTH - len(data), socket.MSG_PEEK)
            if not ahead:
                raise ProxyHeaderError("the connection closed within the PROXY v1 line")
            end = ahead.find(b"\n")
            data += _recv_exactly(sock, end + 1 if end >= 0 else len(ahead))
    else:
        raise ProxyHeaderError("the connection does not start with a PROXY protocol header")
    parsed = parse_proxy_header(data)
    if parsed is None or parsed[1] != len(data):
        raise ProxyHeaderError("malformed PROXY protocol header")
    return parsed[0]


def _recv_exactly(sock: Any, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ProxyHeaderError("the connection closed within its PROXY protocol header")
        data += chunk
    return data
