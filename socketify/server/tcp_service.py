"""The TCP service of one worker: handlers on accepted connections, idle timeout, stop.

Theory of operation. An `Acceptor` takes connections in (cap, EMFILE pause, PROXY header
binds), exactly as for the HTTP service; each connection gets a greenlet that reads the PROXY
header where one is expected, completes the TLS handshake where there is one, and runs the
user's handler on a `StreamConnection` over a gevent socket. The connection stamps each
completed read and write; one sweeper greenlet expires connections idle for longer than
`idle_timeout`, and the read or write their handler waits in raises `IdleTimeout`.
`stop(graceful=True)` closes the listeners and sets the stop signal, which handlers see as
`conn.stopping`, `conn.wait_stop()` and their `conn.on_stop` callbacks (the moment to say
goodbye); it returns as soon as every handler has returned, or after `graceful_timeout`,
when it closes what is left (a handler blocked in a read gets an error).
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gevent
from gevent import socket as green_socket

from socketify.server.acceptor import Acceptor
from socketify.server.proxy_intake import ProxyIntake
from socketify.server.tls_stream import server_context
from socketify.server.turns import Turn
from socketify.tcp.connection import StreamConnection, TlsInfo
from socketify.tcp.errors import StreamError

if TYPE_CHECKING:
    from socketify.core.tls_options import TlsOptions
    from socketify.tcp.service import Service

__all__ = ["TcpService"]

log = logging.getLogger("socketify.error")

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
        proxy = proxy or ProxyIntake.build(self.options.proxy_protocol, self.options.proxy_allow)
        self.acceptor = Acceptor(
            listeners,
            self._start_serving,
            max_connections=self.options.max_connections,
            proxy=proxy,
        )
        self._sweeper: gevent.Greenlet | None = None
        self._connection_done = on_connection
        self._tls_context = server_context(tls) if tls is not None else None

    @property
    def stopping(self) -> bool:
        """True once the service stopped accepting (a stop is under way)."""
        return self.acceptor.stopping

    @property
    def connections(self) -> set[TcpClient]:
        """The connections being served."""
        return self.acceptor.connections

    def start(self) -> None:
        """Begin accepting; returns at once (everything runs in greenlets)."""
        self.acceptor.start()
        if self.options.idle_timeout is not None:
            self._sweeper = gevent.spawn(self._sweep, self.options.idle_timeout)

    def _start_serving(self, sock: Any, addr: Any, proxy: ProxyIntake | None) -> TcpClient:
        # The handler reads in blocking style: a cooperative socket on the accepted fd.
        fd = sock.detach()
        client = TcpClient(green_socket.socket(sock.family, sock.type, sock.proto, fileno=fd))
        client.greenlet = gevent.spawn(self._serve, client, addr, proxy)
        return client

    def _serve(self, client: TcpClient, addr: Any, proxy: ProxyIntake | None) -> None:
        options = self.options
        sock = client.sock
        try:
            if sock.family != socket.AF_UNIX:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if proxy is not None:
                addr = self._client_address(sock, addr, proxy)
                if addr is None:
                    return
            tls = None
            if self._tls_context is not None:
                sock.settimeout(options.handshake_timeout)
                sock = client.sock = self._tls_context.wrap_socket(
                    sock, server_side=True, do_handshake_on_connect=False
                )
                sock.do_handshake()
                sock.settimeout(None)
                tls = TlsInfo.of(sock)
            client.stream = StreamConnection(
                sock,
                addr,
                local=sock.getsockname(),
                max_line=options.max_line,
                tls=tls,
                stop=self.acceptor.stop_signal,
                between_reads=Turn().check,  # a flooding client takes turns with the others
            )
            self.service.handler(client.stream)
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
            # Forgotten before the close: the metrics read the socket's byte counters there.
            self.acceptor.forget(client)
            client.close()
            if self._connection_done is not None:
                self._connection_done()

    def _client_address(self, sock: Any, addr: Any, proxy: ProxyIntake) -> Any:
        """Read the PROXY header (within handshake_timeout): the client's address it names,
        the peer's own for a LOCAL or UNSPEC one, or None when the connection must close."""
        peer = "unix" if sock.family == socket.AF_UNIX else addr[0]
        # The cooperative socket parks in recv itself: the reader never needs to wait.
        with gevent.Timeout(self.options.handshake_timeout, TimeoutError):
            header = proxy.read_header(sock, peer, _never)
        if header is None:
            return None
        return header.source if header.source is not None else addr

    def _sweep(self, idle_timeout: float) -> None:
        while True:
            gevent.sleep(SWEEP_INTERVAL)
            stale = time.monotonic() - idle_timeout
            for client in list(self.connections):
                stream = client.stream
                if stream is not None and stream.last_active < stale:
                    stream.expire()

    # -- stopping -------------------------------------------------------------------------------

    def stop_accepting(self) -> None:
        """Close the listeners; connections already accepted carry on."""
        self.acceptor.stop_accepting()

    def stop(self, graceful: bool = True, timeout: float | None = None) -> None:
        """Stop accepting; with `graceful`, tell the handlers and let them finish first."""
        acceptor = self.acceptor
        if graceful:
            acceptor.begin_stop()
            acceptor.drain(self.options.graceful_timeout if timeout is None else timeout)
        else:
            acceptor.stop_accepting()
        left = [client.greenlet for client in acceptor.connections]
        acceptor.close_all()  # a handler blocked on its socket gets an error and unwinds
        gevent.joinall(left, timeout=_STOP_JOIN)
        gevent.killall([greenlet for greenlet in left if not greenlet.dead], block=False)
        if self._sweeper is not None:
            self._sweeper.kill(block=False)


class TcpClient:
    """One accepted TCP connection: its greenlet, its socket, and the handler's view of it."""

    __slots__ = ("greenlet", "sock", "stream")

    def __init__(self, sock: Any) -> None:
        self.sock = sock  # the TLS socket once the handshake wraps it
        self.greenlet: Any = None
        self.stream: StreamConnection | None = None  # once past the PROXY header and TLS

    def close(self) -> None:
        """Close the connection; a handler blocked on it wakes up (again is fine)."""
        if self.stream is not None:
            self.stream.close()
        else:
            self.sock.close()


def _never() -> None:
    """The wait of a cooperative socket's reader: its recv parks by itself."""
