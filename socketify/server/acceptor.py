"""`Acceptor`: how one service of a worker takes connections in, and how it lets them go.

Theory of operation. Each listening socket gets a libev read watcher whose callback runs in
the hub, accepts every pending connection without blocking (a batch at most, so one busy
listener does not hold the loop) and hands each new socket to the service's `start_serving`,
which serves it in a greenlet of its own and returns the object the acceptor keeps count of. At
`max_connections` the watchers stop, so new clients wait in the kernel's backlog instead of
being accepted and starved; an EMFILE (or a kernel out of buffers) pauses accepting briefly
instead of spinning. A served connection calls `forget` when it ends, before its socket
closes (a `WireMeter`, when metrics are on, reads the socket's byte counters a last time
there), which resumes a paused acceptor and, once none is left, marks the service drained.

Stopping is the same for every kind of service: `stop_accepting` closes the listeners (every
fd of them this process holds, so the kernel refuses new clients at once instead of queueing
them); `begin_stop` also sets the `StopSignal`, so connections that outlive a request (Pulse
channels, event streams, TCP handlers) hear it and wind down; `drain` waits until every
connection has ended or the time is up, and `close_all` closes what is left. What "winding
down" means for an ordinary request is the service's own business (an idle HTTP/1.1
connection gets a short grace, an HTTP/2 one says GOAWAY).

A listener on a bind that expects a PROXY protocol header passes the service's
`ProxyIntake` along with each socket; the connection reads the header first (see
`server.proxy_intake`), before TLS or anything else.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import gevent.event
from gevent import get_hub
from gevent.monkey import get_original

from socketify.server.stop_signal import StopSignal

if TYPE_CHECKING:
    from socketify.server.proxy_intake import ProxyIntake
    from socketify.server.wire_meter import WireMeter

__all__ = ["ACCEPT_PAUSE", "Acceptor", "Served", "plain_socket"]

log = logging.getLogger("socketify.error")

ACCEPT_PAUSE = 0.1  # after EMFILE/ENFILE: give closing connections a moment to free fds
_ACCEPT_BATCH = 64  # accepts per readiness callback before others get a turn
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_CLIENT_GAVE_UP = (errno.ECONNABORTED, errno.EPROTO, errno.EINTR)

_PlainSocket = get_original("socket", "socket")


class Served(Protocol):
    """What a service hands back for each accepted connection: something that can close."""

    sock: Any  # the socket it is served on (the TLS one once there is a handshake)

    def close(self) -> None:
        """Close the connection; whatever serves it unwinds and calls `forget`."""


# `start_serving(sock, addr, proxy)`: serve the accepted plain socket `sock` from `addr`.
StartServing = Callable[[Any, Any, "ProxyIntake | None"], Served]


class Acceptor:
    """Accepts on a service's listening sockets; counts, caps, stops and drains its connections."""

    def __init__(
        self,
        listeners: list[socket.socket],
        start_serving: StartServing,
        *,
        max_connections: int,
        proxy: ProxyIntake | None = None,
    ) -> None:
        self.start_serving = start_serving
        self.max_connections = max_connections
        self.connections: set[Any] = set()
        self.stop_signal = StopSignal()
        self.stopping = False
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
        self._drained = gevent.event.Event()
        self._drained.set()
        # Counts each connection's bytes a last time as it goes (set when metrics are on).
        self.meter: WireMeter | None = None

    def start(self) -> None:
        """Begin accepting; returns at once (the watchers run in the hub)."""
        for watcher, sock, proxy in zip(
            self._watchers, self._listeners, self._proxies, strict=True
        ):
            watcher.start(self._accept, sock, proxy)

    # -- accepting ------------------------------------------------------------------------------

    def _accept(self, listener: Any, proxy: ProxyIntake | None) -> None:
        for _ in range(_ACCEPT_BATCH):
            if len(self.connections) >= self.max_connections:
                self._pause()
                return
            try:
                sock, addr = listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES:
                    log.warning("accept failed (%s); pausing accepts", exc.strerror)
                    self._pause(ACCEPT_PAUSE)
                elif exc.errno not in _CLIENT_GAVE_UP:
                    log.error("accept failed: %s", exc)
                return
            # The standard library's accept wraps the new fd in the module's (patched)
            # socket class; the connection gets the plain class, like its listener.
            self.track(self.start_serving(_plain(sock), addr, proxy))

    def track(self, conn: Served) -> None:
        """Count `conn` among the service's connections until it calls `forget`."""
        self.connections.add(conn)
        self._drained.clear()

    def forget(self, conn: Served) -> None:
        """A connection ended (its socket not closed yet): drop it, resume if we were full."""
        if self.meter is not None:
            self.meter.last_look(conn)
        self.connections.discard(conn)
        if not self.connections:
            self._drained.set()
        if self._paused and len(self.connections) < self.max_connections:
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
        self.start()

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

    def begin_stop(self) -> None:
        """Stop accepting and tell the long-lived connections (the `StopSignal`)."""
        self.stop_accepting()
        self.stop_signal.set()

    def drain(self, timeout: float) -> bool:
        """Wait until every connection has ended, at most `timeout` seconds; True if all did."""
        return bool(self._drained.wait(timeout))

    def close_all(self) -> None:
        """Close every connection still open (the end of a stop)."""
        meter = self.meter
        for conn in list(self.connections):
            if meter is not None:
                meter.look(conn)  # its `forget` comes after the close, too late to read
            conn.close()


def plain_socket(family: int, type: int, proto: int, fd: int) -> Any:
    """The standard library's own socket class (not gevent's) on `fd`, non-blocking.

    PERF: the server does its own readiness waits, so it skips the cooperative wrapper's
    Python layers on every recv and send.
    """
    sock = _PlainSocket(family, type, proto, fd)
    sock.setblocking(False)
    return sock


def _plain(sock: socket.socket) -> Any:
    return plain_socket(sock.family, sock.type, sock.proto, sock.detach())


def _raw_listener(sock: socket.socket) -> Any:
    """A non-blocking listener of the plain socket class on a duplicate of `sock`'s fd."""
    return plain_socket(sock.family, sock.type, sock.proto, os.dup(sock.fileno()))
