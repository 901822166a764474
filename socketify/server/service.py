"""The HTTP service of one worker: its connections, their deadlines, and how it stops.

Theory of operation. An `Acceptor` takes connections in (cap, EMFILE pause, PROXY header
binds) and hands each to a `Connection` greenlet. One sweeper greenlet expires connections
whose phase deadline has passed, every quarter second. `stop(graceful=True)` closes the
listeners and sets the stop signal: Pulse channels close with 1001 (Going Away) and event
streams end, HTTP/2 connections say GOAWAY and finish their open streams, idle keep-alive
connections get a short grace (a request may be on the wire), and in-flight requests finish
(their answer carries `Connection: close`). It returns as soon as every connection has ended,
or when `graceful_timeout` has passed.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gevent

from socketify.server import green_asyncio
from socketify.server.acceptor import Acceptor
from socketify.server.connection import IDLE, Connection
from socketify.server.tls_stream import server_context

if TYPE_CHECKING:
    from socketify.core.application import Application
    from socketify.core.options import ServerOptions
    from socketify.core.tls_options import TlsOptions
    from socketify.server.proxy_intake import ProxyIntake
    from socketify.server.stop_signal import StopSignal

SWEEP_INTERVAL = 0.25
STOP_IDLE_GRACE = 1.0  # seconds an idle keep-alive connection may still send after a stop


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
        self.acceptor = Acceptor(
            listeners,
            self._start_serving,
            max_connections=self.options.max_connections,
            proxy=proxy,
        )
        # Called once per answered request (max_requests recycling lives in the worker);
        # PERF: bound here so the connection makes one call, not two.
        self.request_done: Callable[[], Any] = on_request or _count_nothing
        self._sweeper: Any = None
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

    @property
    def stopping(self) -> bool:
        """True once the service stopped accepting (a stop is under way)."""
        return self.acceptor.stopping

    @property
    def stop_signal(self) -> StopSignal:
        """Set when a graceful stop begins; upgraded connections subscribe to it."""
        return self.acceptor.stop_signal

    @property
    def connections(self) -> set[Connection]:
        """The connections being served."""
        return self.acceptor.connections

    def start(self) -> None:
        """Begin accepting; returns at once (everything runs in greenlets)."""
        self.app.freeze()
        self.acceptor.start()
        self._sweeper = gevent.spawn(self._sweep)

    def _start_serving(self, sock: Any, addr: Any, proxy: ProxyIntake | None) -> Connection:
        if sock.family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            peer = addr[0]
        else:
            peer = "unix"
        # TLS (its handshake) and the PROXY header run in the connection's greenlet.
        conn = Connection(self, sock, peer, tls=self._tls_context, proxy=proxy)
        conn.greenlet = gevent.spawn_raw(conn.serve)
        return conn

    def adopt(self, conn: Connection) -> None:
        """Serve `conn`, made elsewhere (an in-process connection), as if accepted."""
        self.acceptor.track(conn)
        conn.greenlet = gevent.spawn_raw(conn.serve)

    def forget(self, conn: Connection) -> None:
        """A connection ended: drop it, and resume accepting if we were full."""
        self.acceptor.forget(conn)

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
        self.acceptor.stop_accepting()

    def stop(self, graceful: bool = True, timeout: float | None = None) -> None:
        """Stop accepting; with `graceful`, let what is in flight finish first (see above)."""
        acceptor = self.acceptor
        if graceful:
            acceptor.begin_stop()
            self._wind_down()
            acceptor.drain(self.options.graceful_timeout if timeout is None else timeout)
        else:
            acceptor.stop_accepting()
        acceptor.close_all()
        if self._sweeper is not None:
            self._sweeper.kill(block=False)

    def _wind_down(self) -> None:
        # An idle keep-alive client may have a request on the wire right now: closing at once
        # would fail it. Give idle connections a short grace instead; whatever arrives is
        # answered with `Connection: close`, and silent ones are closed when it runs out.
        # An HTTP/2 connection says GOAWAY now and closes once its open streams are answered.
        # Upgraded connections heard the stop signal.
        deadline = time.monotonic() + STOP_IDLE_GRACE
        for conn in list(self.connections):
            if conn.http2 is not None:
                conn.http2.stop()
            elif conn.phase == IDLE and not conn.http.buffered:
                conn.deadline = min(conn.deadline or deadline, deadline)


def _count_nothing() -> None:
    """The request counter when nothing counts requests (in-process mode, tests)."""
