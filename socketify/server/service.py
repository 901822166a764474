"""The HTTP service of one worker: accept loop, connection registry, deadlines, draining.

Theory of operation. Each listening socket gets a libev read watcher whose callback runs in
the hub, accepts every pending connection without blocking, and spawns a raw greenlet per
connection. At `max_connections` the watchers stop, so new clients wait in the kernel's
backlog instead of being accepted and starved; an EMFILE pauses accepting briefly instead of
spinning. One sweeper greenlet expires connections whose phase deadline has
passed, every quarter second. `stop(graceful=True)` closes the listeners, gives idle
keep-alive connections a short grace (a request may be on the wire), lets in-flight requests
finish (their answer carries `Connection: close`), and returns when all are gone or
`graceful_timeout` has passed. HTTP/2 connections get GOAWAY and finish their open streams.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gevent
from gevent import get_hub
from gevent.monkey import get_original

from socketify.server import green_asyncio
from socketify.server.connection import IDLE, Connection
from socketify.server.tls_stream import server_context

if TYPE_CHECKING:
    from socketify.core.application import Application
    from socketify.core.options import ServerOptions
    from socketify.core.tls_options import TlsOptions
    from socketify.server.proxy_intake import ProxyIntake

_PlainSocket = get_original("socket", "socket")

log = logging.getLogger("socketify.error")

SWEEP_INTERVAL = 0.25
ACCEPT_PAUSE = 0.1  # after EMFILE/ENFILE: give closing connections a moment to free fds
STOP_IDLE_GRACE = 1.0  # seconds an idle keep-alive connection may still send after a stop
_ACCEPT_BATCH = 64  # accepts per readiness callback before others get a turn


class HttpService:
    """Serves `app` on listening sockets inside one gevent worker process."""

    def __init__(
        self,
        app: Application,
        listeners: list[socket.socket],
        *,
        on_request: Callable[[], Any] | None = None,
        tls: TlsOptions | None = None,
        http2: bool = True,
        proxy: ProxyIntake | None = None,
    ) -> None:
        self.app = app
        self.options: ServerOptions = app.settings
        green_asyncio.install()  # `async def` handlers run on this process's asyncio loop
        self.stopping = False
        self.connections: set[Connection] = set()
        # Called once per answered request (max_requests recycling lives in the worker);
        # PERF: bound here so the connection makes one call, not two.
        self.request_done: Callable[[], Any] = on_request or _count_nothing
        # What answers a request; rebound by start() once the app is frozen (see there).
        self._given = list(listeners)  # closed on stop too: see stop_accepting
        self._listeners = [_raw_listener(sock) for sock in listeners]
        loop = get_hub().loop
        self._watchers = [loop.io(sock.fileno(), 1) for sock in self._listeners]
        # Per listener: the PROXY protocol settings when its bind expects the header, else None.
        self._proxies = [
            proxy if proxy is not None and proxy.covers(sock.getsockname()) else None
            for sock in listeners
        ]
        self._paused = False
        self._sweeper: Any = None
        self._drained = gevent.event.Event()
        self._drained.set()
        # HTTP/2 when the options ask for it: ALPN over TLS, the preface on cleartext (the
        # connection checks its first bytes).
        # `http2=False` is the command line's `--no-http2`, over the app's own option.
        self.http2 = http2 and self.options.http2
        # What a connection that speaks HTTP/2 is handed to; imported now, not on the first
        # HTTP/2 client, and only when HTTP/2 is on.
        self.http2_session: Callable[[Connection], Any] | None = None
        if self.http2:
            from socketify.server.http2 import Http2Session

            self.http2_session = Http2Session
        self._tls_context = server_context(tls, self.http2) if tls is not None else None

    def start(self) -> None:
        """Begin accepting; returns at once (everything runs in greenlets)."""
        app = self.app
        app.freeze()
        self._start_watchers()
        self._sweeper = gevent.spawn(self._sweep)

    # -- accepting ------------------------------------------------------------------------------

    def _accept(self, listener: Any, proxy: ProxyIntake | None) -> None:
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
            sock = plain_socket(listener.family, listener.type, listener.proto, fd)
            self._spawn(sock, addr, proxy)

    def _spawn(self, sock: Any, addr: Any, proxy: ProxyIntake | None) -> None:
        sock.setblocking(False)
        if sock.family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            peer = addr[0]
        else:
            peer = "unix"
        # TLS (its handshake) and the PROXY header run in the connection's greenlet.
        conn = Connection(self, sock, peer, tls=self._tls_context, proxy=proxy)
        self.connections.add(conn)
        self._drained.clear()
        conn.greenlet = gevent.spawn_raw(conn.serve)

    def forget(self, conn: Connection) -> None:
        """A connection ended: drop it, and resume accepting if we were full."""
        self.connections.discard(conn)
        if not self.connections:
            self._drained.set()
        if self._paused and len(self.connections) < self.options.max_connections:
            self._resume()

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
        self._start_watchers()

    def _start_watchers(self) -> None:
        for watcher, sock, proxy in zip(
            self._watchers, self._listeners, self._proxies, strict=True
        ):
            watcher.start(self._accept, sock, proxy)

    # -- deadlines ------------------------------------------------------------------------------

    def _sweep(self) -> None:
        while True:
            gevent.sleep(SWEEP_INTERVAL)
            now = time.monotonic()
            for conn in list(self.connections):
                deadline = conn.deadline
                if deadline is not None and deadline <= now:
                    conn.expire()

    # -- stopping -------------------------------------------------------------------------------

    def stop_accepting(self) -> None:
        """Close the listeners; connections already accepted carry on."""
        if self.stopping:
            return
        self.stopping = True
        for watcher in self._watchers:
            watcher.close()
        # The given sockets too, not only our duplicates: while any fd of this process still
        # refers to a listening socket the kernel keeps completing handshakes into its queue,
        # and those clients would hang until we exit instead of being refused now.
        for sock in (*self._listeners, *self._given):
            sock.close()

    def stop(self, graceful: bool = True, timeout: float | None = None) -> None:
        """Stop accepting; with `graceful`, let in-flight requests finish first."""
        self.stop_accepting()
        if graceful:
            self._close_idle()
            wait = self.options.graceful_timeout if timeout is None else timeout
            self._drained.wait(wait)
        for conn in list(self.connections):
            conn.close()
        if self._sweeper is not None:
            self._sweeper.kill(block=False)

    def _close_idle(self) -> None:
        # An idle keep-alive client may have a request on the wire right now: closing at once
        # would fail it. Give idle connections a short grace instead; whatever arrives is
        # answered with `Connection: close`, and silent ones are closed when it runs out.
        # An HTTP/2 connection says GOAWAY now and closes once its open streams are answered.
        deadline = time.monotonic() + STOP_IDLE_GRACE
        for conn in list(self.connections):
            if conn.http2 is not None:
                conn.http2.stop()
            elif conn.phase == IDLE and not conn.http.buffered:
                conn.deadline = min(conn.deadline or deadline, deadline)


def _count_nothing() -> None:
    """The request counter when nothing counts requests (in-process mode, tests)."""


def plain_socket(family: int, type: int, proto: int, fd: int) -> Any:
    """The standard library's own socket class (not gevent's) on `fd`, non-blocking.

    PERF: the server does its own readiness waits, so it skips the cooperative wrapper's
    Python layers on every recv and send.
    """
    sock = _PlainSocket(family, type, proto, fd)
    sock.setblocking(False)
    return sock


def accept_fd(listener: Any) -> tuple[int, Any]:
    """(fd, address) of the next connection waiting on a non-blocking `listener`."""
    sock, addr = listener.accept()
    return sock.detach(), addr


def _raw_listener(sock: socket.socket) -> Any:
    """A non-blocking listener of the plain socket class on a duplicate of `sock`'s fd."""
    return plain_socket(sock.family, sock.type, sock.proto, os.dup(sock.fileno()))
