"""One client connection: read, parse, dispatch, write — in its own greenlet.

Theory of operation. The connection owns a raw non-blocking socket and two libev watchers.
Reads and writes try the socket first and only park the greenlet on a watcher when the kernel
says EAGAIN, so a request whose bytes are already there costs no hub switch. Deadlines are
whole phases, not the time since the last byte: `deadline` is set when a phase starts — idle between
requests, the head from its first byte, the body, the handler with `request_timeout` — and
the service's sweeper throws `Expired` into a connection whose deadline has passed. Pipelined
requests already in the buffer are answered in one batch and written with one send. A client
whose input is always there (it pipelines faster than it is answered) never makes the
greenlet wait, so between requests and reads it takes turns with the worker's other
connections (`server.turns`).

On a bind behind a TCP proxy the connection first reads the PROXY protocol header (see
`server.proxy_intake`), before the TLS handshake: the client address it names becomes `addr`;
the reader takes exactly the header, so what follows stays in the socket for TLS or HTTP.

A connection that speaks HTTP/2 (TLS chose `h2` by ALPN, or a cleartext client opened with
the HTTP/2 preface) is handed to `server.http2.Http2Session` after the handshake or its first
read, and this greenlet becomes that session's reader.

Bodies are never read before the app runs: it gets a `RequestBody` that pulls pieces from
the parser when it reads (see `request_body`), so a limit can refuse a body from its
Content-Length before one byte of it, or a `100 Continue`, is sent. The body deadline counts
only the time spent waiting for the client, across all the app's reads. After the answer the
unread rest is dropped (within a budget) or the connection closes; a connection that closes
on a client still sending lingers briefly, so the kernel does not reset our answer.
"""

from __future__ import annotations

import errno
import logging
import socket
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

from gevent import GreenletExit, get_hub, getcurrent

from socketify.core.request import Request
from socketify.core.response import Response
from socketify.protocol.http11 import CLOSED, NEED_DATA, ParseError, RequestHead, ServerConnection
from socketify.protocol.proxy_header import ProxyHeader
from socketify.server.errors import Expired, PeerGone
from socketify.server.exchange import FileRange, request_for, response_parts
from socketify.server.file_sender import send_file
from socketify.server.request_body import RequestBody, Unread
from socketify.server.tls_stream import TlsStream
from socketify.server.turns import Turn

# The first bytes of every HTTP/2 connection: no HTTP/1.1 request starts with them.
PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

if TYPE_CHECKING:
    import ssl

    from socketify.server.proxy_intake import ProxyIntake
    from socketify.server.service import HttpService

log = logging.getLogger("socketify.error")

READ_SIZE: Final = 65536
BATCH_BYTES: Final = 65536  # flush pipelined responses once this much is queued
ANSWERS_PER_CHECK: Final = 16  # pipelined answers between two looks at the connection's turn
# How long we drain input after an answer we close on, so it is not reset.
LINGER_SECONDS: Final = 2.0
_monotonic: Final = time.monotonic

# DISCARD: reading input only to drop it (an unread body after the answer, or before a
# close); its deadline passing closes silently, as WRITE's does. PREAMBLE: waiting for the
# PROXY protocol header, bounded by header_timeout. (`Final`: a compiled build inlines them.)
IDLE: Final = 0
HEAD: Final = 1
BODY: Final = 2
HANDLER: Final = 3
WRITE: Final = 4
UPGRADED: Final = 5
DISCARD: Final = 6
PREAMBLE: Final = 7


class Connection:
    """Serves one accepted socket until it closes."""

    __slots__ = (
        "_body_time",
        "_hub",
        "_out",
        "_read_watcher",
        "_reading",
        "_waiting",
        "addr",
        "deadline",
        "greenlet",
        "http",
        "http2",
        "origin_scheme",
        "peer_cert",
        "phase",
        "proxy",
        "proxy_header",
        "scheme",
        "server_name",
        "service",
        "sock",
        "tls",
        "turn",
        "write_watcher",
    )

    def __init__(
        self,
        service: HttpService,
        sock: Any,
        addr: str,
        *,
        tls: ssl.SSLContext | None = None,
        proxy: ProxyIntake | None = None,
    ) -> None:
        # `sock` is a plain non-blocking socket; with `tls`, `serve` wraps it in a `TlsStream`
        # (same recv/send contract) once the PROXY header, if `proxy` expects one, is read.
        self.service = service
        self.sock = sock
        self.addr = addr
        opts = service.options
        self.http = ServerConnection(
            opts.max_header_size,
            opts.max_target_size,
            opts.max_body_size,
            allow_bare_lf=opts.allow_bare_lf,
        )
        self._hub = hub = get_hub()
        fd = sock.fileno()
        self._read_watcher = hub.loop.io(fd, 1)
        self.write_watcher = hub.loop.io(fd, 2)
        self._reading = False  # the read watcher is started
        # The greenlet parked until the socket is readable: the connection's own, or the one
        # running an `async def` handler that reads the body (the worker's event loop).
        self._waiting: Any = None
        self._out: list[bytes] = []
        self.phase = IDLE
        self.deadline: float | None = None
        self.greenlet: Any = None
        self.tls = tls
        self.scheme = "https" if tls is not None else "http"
        self.proxy = proxy
        # The PROXY header the load balancer sent, and the scheme the client used at it.
        self.proxy_header: ProxyHeader | None = None
        self.origin_scheme = self.scheme
        self.server_name: str | None = None  # the host the client named in TLS (SNI)
        self.peer_cert: dict[str, Any] | None = None
        self._body_time = 0.0  # seconds left of the current body's deadline
        self.http2: Any = None  # the Http2Session this connection was handed to, if any
        # Its share of the worker while its input comes without waiting (see server.turns).
        self.turn = Turn(hub.loop)

    # -- the request loop -------------------------------------------------------------------

    def serve(self) -> None:
        """Answer requests until the client leaves, an error closes, or the server stops."""
        service = self.service
        try:
            if self.proxy is not None and not self._read_proxy_header():
                return
            if self.tls is not None:
                self.sock = TlsStream(self.tls, self.sock)
                if not self._handshake():
                    return
                if service.http2 and self.sock.alpn_protocol == "h2":
                    self._serve_http2(b"")
                    return
            else:
                if service.http2 and self._starts_http2():
                    self._serve_http2(self.http.take_buffered())
                    return
            self._serve_requests()
        except Expired as exc:
            self._expired(exc.phase)
        except ParseError as exc:
            self._refuse(exc.status, exc.detail)
        except (PeerGone, ConnectionError, TimeoutError):
            pass
        except Exception:
            log.exception("connection from %s failed", self.addr)
        finally:
            # Forgotten before the close: the metrics read the socket's byte counters there,
            # the TLS goodbye among them.
            if isinstance(self.sock, TlsStream):
                self.sock.notify_close()
            service.forget(self)
            self.close()

    def _read_proxy_header(self) -> bool:
        """Read the PROXY header within header_timeout; False: close."""
        proxy = self.proxy
        assert proxy is not None
        self.phase = PREAMBLE
        self.deadline = _monotonic() + self.service.options.header_timeout
        try:
            header = proxy.read_header(self.sock, self.addr, self.wait_readable)
        except Expired:
            log.warning("closed a connection from %s: no PROXY header in time", self.addr)
            return False
        if header is None:
            return False
        self.phase = IDLE
        self.proxy_header = header
        if header.source is not None:
            self.addr = "unix" if header.family == "UNIX" else header.source[0]
        self.server_name = header.authority  # the SNI name the proxy saw, if it says
        tls_info = header.tls
        if tls_info is not None and tls_info.client_ssl:
            self.origin_scheme = "https"  # the proxy ended the client's TLS
        return True

    def _handshake(self) -> bool:
        """Complete the TLS handshake within header_timeout; False (close silently) if it fails.

        Not idle_timeout: a client that sends nothing, or half a ClientHello, would hold a
        connection (and the memory of its TLS state) for that long at no cost to itself.
        """
        sock = self.sock
        assert isinstance(sock, TlsStream)
        self.deadline = _monotonic() + self.service.options.header_timeout
        while True:
            try:
                step = sock.handshake_step()
            except (OSError, ValueError):
                return False  # a failed handshake costs nothing else: no answer, no log noise
            if step == 0:
                self.peer_cert = sock.peer_certificate()
                self.server_name = sock.server_name or self.server_name
                return True
            if step == 1:
                self.wait_readable()
            else:
                get_hub().wait(self.write_watcher)

    def _starts_http2(self) -> bool:
        """Read the first bytes; True if they are the HTTP/2 preface (cleartext h2c).

        PERF: one look at the first read of a connection; an HTTP/1.1 request keeps its
        bytes in the parser and goes on as if nothing happened.
        """
        self.deadline = _monotonic() + self.service.options.idle_timeout
        http = self.http
        self._receive()
        while True:
            start = http.peek(len(PREFACE))
            if start == PREFACE:
                return True
            if not start or not PREFACE.startswith(start):
                return False  # HTTP/1.1 (or nothing): the parser has the bytes
            buffered = http.buffered
            self._receive(wait_first=False)
            if http.buffered == buffered:
                return False  # the client closed in the middle of the preface

    def _serve_http2(self, data: bytes) -> None:
        make_session = self.service.http2_session
        assert make_session is not None
        self.phase = IDLE
        session = self.http2 = make_session(self)
        session.serve(data)

    def _serve_requests(self) -> None:
        service = self.service
        http = self.http
        idle_timeout = service.options.idle_timeout
        answered = 0
        while True:
            event = http.next_event()
            if event.__class__ is RequestHead:
                if not self._answer(event):
                    self._flush()
                    return
                self.phase = IDLE
                answered += 1
                if answered == ANSWERS_PER_CHECK:
                    # A batch of pipelined requests must not hold the worker. PERF: a look
                    # every few answers, not after each: in a profile of a pipelining flood,
                    # one look per answer took ~5% of the worker.
                    answered = 0
                    self.turn.check()
                continue
            if event is NEED_DATA:
                if self.phase == IDLE:
                    # The idle deadline runs from the end of the last answer; set here, once
                    # per batch, because only waiting for more input can outlast it.
                    self.deadline = _monotonic() + idle_timeout
                if self._out:
                    self._flush()
                if self.phase == IDLE and service.stopping:
                    return
                self._receive()
                continue
            if event is CLOSED:
                self._flush()
                return
            # Unreachable: `_answer` keeps a connection only once the body was read to its
            # end. Should it happen, close rather than read a body as a request (and never
            # log what the client sent).
            log.error("body bytes from %s where a request should start; closing", self.addr)
            return

    def _receive(self, wait_first: bool = True) -> None:
        """Read into the parser, waiting for the client if nothing is there."""
        http = self.http
        waited = False
        if http.buffered:
            if self.phase == IDLE:
                self._start_head()  # part of a pipelined request is already here
        elif wait_first and not (self.scheme == "https" and self.sock.buffered):
            # PERF: a keep-alive client sends its next request only after reading our answer,
            # so reading now would nearly always be a wasted EAGAIN syscall: wait first.
            self.wait_readable()
            waited = True
        while True:
            try:
                data = self.sock.recv(READ_SIZE)
                break
            except BlockingIOError:
                self.wait_readable()
                waited = True
        if data and self.phase == IDLE:
            self._start_head()
        http.receive_data(data)
        if not waited:
            self.turn.check()  # input that is always there must not hold the worker

    def _start_head(self) -> None:
        # The first byte of a request starts its header deadline: a whole phase, not a gap.
        self.phase = HEAD
        self.deadline = _monotonic() + self.service.options.header_timeout

    def wait_readable(self) -> None:
        """Park this greenlet until the socket is readable.

        PERF: the read watcher stays started between requests (no epoll_ctl churn); its
        callback switches straight into this greenlet instead of going through a Waiter.
        """
        if not self._reading:
            self._reading = True
            self._read_watcher.start(self._on_readable)
        self._waiting = getcurrent()
        try:
            self._hub.switch()
        finally:
            self._waiting = None

    def _on_readable(self) -> None:
        if self._waiting is not None:
            self._waiting.switch()
        else:
            # Readable while busy (pipelined bytes during a handler): stop, or the
            # level-triggered watcher would fire on every loop turn until we read.
            self._reading = False
            self._read_watcher.stop()

    def _wait_for_body(self, body: RequestBody) -> None:
        """Receive more of the body the app is reading, under the body deadline.

        The deadline is one whole phase across the app's reads: only time spent waiting
        for the client counts, not the app's own work between reads; and that time does
        not count against the app's own deadline (`request_timeout`), which moves on by as
        much. The first wait tells a client that sent `Expect: 100-continue` to go ahead.
        """
        outer_phase, outer_deadline = self.phase, self.deadline
        started = _monotonic()
        deadline = started + self._body_time
        self.phase, self.deadline = BODY, deadline
        try:
            interim = self.http.continue_response(body.head)
            if interim:
                self._flush()  # answers to pipelined requests go first
                self.send(interim)
            # The body is usually on its way already: read before waiting.
            self._receive(wait_first=False)
        except (PeerGone, ConnectionError):
            # A client gone in the middle of its body is a body cut short (the parser says
            # so, and the app unwinds with a 400), not an error of the app's to log.
            self.http.receive_data(b"")
        finally:
            now = _monotonic()
            self._body_time = deadline - now
            self.phase = outer_phase
            if outer_deadline is not None:
                outer_deadline += now - started
            self.deadline = outer_deadline

    def _answer(self, head: RequestHead) -> bool:
        """Run the app, queue or write the response, settle the body; returns keep-alive."""
        service = self.service
        opts = service.options
        http = self.http
        req, body = request_for(
            http,
            head,
            self._wait_for_body,
            self.addr,
            opts.trust_proxy,
            self.origin_scheme,
            self.peer_cert,
            self.proxy_header,
            self.server_name,
        )
        if body is not None:
            self._body_time = opts.body_timeout
        res = Response(req)
        try:
            return self._run(head, req, res, body)
        finally:
            res.close()  # its close callbacks run whatever happened: answered, failed, left

    def _run(
        self, head: RequestHead, req: Request, res: Response, body: RequestBody | None
    ) -> bool:
        """Answer `req` with the app's `res`; see `_answer`."""
        service = self.service
        opts = service.options
        http = self.http
        self.phase = HANDLER
        self.deadline = _monotonic() + opts.request_timeout if opts.request_timeout else None
        try:
            service.app.handle(req, res)
        except Expired as exc:
            if exc.phase == BODY:
                raise  # body_timeout while the handler read the body: 408, like any body
            # request_timeout: the handler was parked on I/O past its deadline.
            log.error("request %s %s exceeded request_timeout", head.method, head.target)
            self._out.append(http.refuse(503, "Request timed out"))
            return self._end_connection(body)
        except GreenletExit:
            raise
        except BaseException:
            # The app maps every Exception. A BaseException escaping the handler (an uncaught
            # gevent.Timeout, SystemExit) must not reach the hub: there it would drop this
            # client without an answer, or end the worker and every connection on it.
            log.exception("request %s %s failed", head.method, head.target)
            self._out.append(http.refuse(500))
            return self._end_connection(body)
        self.phase = WRITE
        keep_alive = not service.stopping
        unread = None
        if body is not None:
            # A framing error in the body raises here: `serve` answers it instead of `res`.
            unread = body.settle(res.status_code)
            if unread is not None:
                keep_alive = keep_alive and unread is Unread.DRAIN
        if res.upgrade is not None:
            # What is left of the body would be read as the new protocol's bytes: it is
            # dropped first, and a body too large to drop refuses the switch.
            if unread is Unread.CLOSE:
                self._out.append(http.refuse(400, "Request body too large for a protocol switch"))
                return self._end_connection(body)
            if unread is Unread.DRAIN:
                self._drain(body)
            self._flush()
            for part in response_parts(http, head, res, keep_alive=False):
                assert isinstance(part, bytes)
                self.send(part)
            self.phase = UPGRADED
            self.deadline = None
            res.upgrade(self)
            return False
        if res.file_path is None and res.stream_iter is None:
            # A buffered answer: queued, so answers to pipelined requests go out in one write.
            data = http.respond(head, res.status_code, res.fields(), res.body, keep_alive)
            out = self._out
            out.append(data)
            if len(out) > 16 or len(data) >= BATCH_BYTES:
                self._flush()
        else:
            self._flush()
            if not self._send_parts(response_parts(http, head, res, keep_alive)):
                return False
        service.request_done()
        keep_alive = http.keep_alive
        if unread is None:
            return keep_alive
        # The answer goes out first: a client may wait for it before sending the rest.
        self._flush()
        if keep_alive and unread is Unread.DRAIN and self._drain(body):
            return True
        return self._end_connection(body)

    def _send_parts(self, parts: Iterable[bytes | FileRange]) -> bool:
        """Write a file or stream answer as it is produced; False if the producer failed."""
        # The handler's request_timeout deadline ends with the handler: left armed, it would
        # cut a stream whose producer is slow to yield its first chunk (after the 200 head,
        # so silently). Blocked sends set their own deadline.
        self.deadline = None
        try:
            for part in parts:
                if isinstance(part, FileRange):
                    send_file(self, part.path, part.offset, part.length, part.head)
                elif part:
                    self.send(part)
                # Waiting for the producer is not a stall; only a blocked send is.
                self.deadline = None
        except (PeerGone, ConnectionError, Expired, GreenletExit):
            raise
        except BaseException:  # gevent.Timeout too: see _answer
            # Too late for an error status: end the connection without the last chunk,
            # so the client sees a truncated body rather than a complete-looking one.
            log.exception("response stream failed")
            return False
        return True

    def _drain(self, body: RequestBody | None) -> bool:
        """Read and drop the body's unread rest within its budget; False: close instead."""
        assert body is not None
        self.phase = DISCARD
        self.deadline = _monotonic() + self.service.options.body_timeout
        try:
            return body.discard(self._receive_more)
        except (ParseError, Expired):
            return False  # too late to answer a bad or stalled body: just close

    def _receive_more(self) -> None:
        self._receive(wait_first=False)

    def _end_connection(self, body: RequestBody | None) -> bool:
        """Close after the queued answers; linger if the client may still be sending a body."""
        if body is None or body.done:
            return False
        self._close_lingering()
        return False

    # -- writing ------------------------------------------------------------------------------

    def _flush(self) -> None:
        out = self._out
        if out:
            data = out[0] if len(out) == 1 else b"".join(out)
            out.clear()
            self.send(data)

    def send(self, data: bytes | memoryview) -> None:
        """Write all of `data`, parking this greenlet while the kernel's buffer is full."""
        sock = self.sock
        try:
            sent = sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            raise PeerGone(exc) from exc
        if sent < len(data):
            self.send_rest(memoryview(data)[sent:])
        if self.scheme == "https" and self.sock.unsent:
            self._drain_tls()

    def send_rest(self, view: memoryview) -> None:
        """Write the rest of an answer the socket did not take at once."""
        hub = get_hub()
        idle = self.service.options.idle_timeout
        while view:
            self.deadline = _monotonic() + idle  # a stalled reader, not a slow one, expires
            hub.wait(self.write_watcher)
            try:
                sent = self.sock.send(view)
            except BlockingIOError:
                continue
            except OSError as exc:
                raise PeerGone(exc) from exc
            view = view[sent:]

    def _drain_tls(self) -> None:
        """Wait until the TLS layer has handed all its ciphertext to the kernel."""
        hub = get_hub()
        while not self.sock.flush():
            self.deadline = _monotonic() + self.service.options.idle_timeout
            hub.wait(self.write_watcher)

    # -- errors and closing -------------------------------------------------------------------

    def _refuse(self, status: int, detail: str) -> None:
        """Answer a request we could not parse, then close without resetting the answer."""
        self._out.append(self.http.refuse(status, detail))
        self._close_lingering()

    def _close_lingering(self) -> None:
        """Send the queued answers, then stop reading requests and linger before the close."""
        self.phase = DISCARD
        self.deadline = _monotonic() + LINGER_SECONDS
        try:
            self._flush()
            self._linger()
        except (PeerGone, ConnectionError, Expired):
            pass

    def _expired(self, phase: int) -> None:
        if phase in (HEAD, BODY):
            self._refuse(408, "")
        elif phase == HANDLER:
            self._refuse(503, "Request timed out")
        # IDLE and WRITE: close silently (keep-alive timeout, or a reader that stopped reading)

    def _linger(self) -> None:
        """Half-close and drain input briefly, so the kernel does not reset our answer."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            return
        end = _monotonic() + LINGER_SECONDS
        while _monotonic() < end:
            try:
                if not self.sock.recv(READ_SIZE):
                    return
                self.turn.check()  # a client still flooding us must not hold the worker
            except BlockingIOError:
                self.wait_readable()
            except OSError:
                return

    def expire(self) -> None:
        """Called by the sweeper: interrupt the greenlet with `Expired` for its phase."""
        phase = self.phase
        self.deadline = None

        def throw() -> None:
            # The greenlet may have moved on since the sweep; only interrupt the same phase.
            glet = self.greenlet
            if glet is not None and not glet.dead and self.phase == phase and not self.deadline:
                glet.throw(Expired(phase))

        get_hub().loop.run_callback(throw)

    def close(self) -> None:
        """Stop the watchers and close the socket; safe to call twice."""
        self._read_watcher.close()
        self.write_watcher.close()
        try:
            self.sock.close()
        except OSError as exc:
            if exc.errno != errno.EBADF:
                raise
