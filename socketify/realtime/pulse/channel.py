"""`Channel`: one WebSocket connection after `pulse.upgrade`.

Theory of operation. The sans-IO `protocol.websocket.Connection` decides every byte; this
module only moves them. The reading side reads, feeds the protocol, runs the callbacks for
the events and writes the protocol's own replies (pongs, close echoes). On plain TCP without
an idle timeout it is `_on_readable`, run by the worker's `Readers` dispatcher for every
channel with input in a loop turn, while the connection greenlet waits for the end; over
TLS or with `idle_timeout` the connection greenlet reads itself (`_read_loop`). Either way
a callback may block cooperatively, and the messages of one channel are handled one after
another, in order. Any greenlet may send: the frame bytes are taken from the protocol and
handed to `Outbound` in one step with no switch in between, so the wire order is the order
the protocol produced them. A close we start waits for the peer's close up to
`close_timeout`; a protocol error sends its close frame, half-closes and lingers briefly so
the peer can read it. The ending (close callbacks, flush, linger) always runs in the
connection greenlet.

A peer that reads slower than we send builds a backlog in `Outbound`; a send that finds it
over `max_backpressure` is not sent (DROPPED). By default the channel then closes with 1008:
the whole messages still waiting are discarded (a peer that does not read would never get
them, and they are the memory we must give back), our close frame goes right behind the one
message in flight, and the usual close wait bounds how long a peer that never reads again
holds the connection; `on_close` reports 1008 either way. With
`close_on_backpressure_limit=False` the channel stays open and only drops, as uWebSockets
does by default. A channel whose peer stays silent through its `idle_timeout` (and the ping
after it) gets a close frame with 1001 before the connection is dropped.

A graceful stop or reload of the worker closes every channel with 1001 (Going Away): the
`on_stop` callbacks run first (a last message may go out), then the close handshake, which
waits for the peer's answer only `STOP_CLOSE_TIMEOUT`, so a stopping worker is not held by
a peer that never answers.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gevent
import orjson
from gevent import GreenletExit

from socketify.core.coroutines import blocking
from socketify.metrics.builtin import WEBSOCKET_MESSAGES
from socketify.metrics.recorder import counter
from socketify.protocol.websocket import (
    CLOSED,
    NEED_DATA,
    BinaryMessage,
    Close,
    CloseCode,
    LocalProtocolError,
    Ping,
    Pong,
    State,
    TextMessage,
)
from socketify.protocol.websocket import Connection as Protocol
from socketify.server.connection import READ_SIZE
from socketify.server.upgraded import (
    DROPPED,
    MAX_BACKPRESSURE,
    Outbound,
    SendStatus,
    check_max_backpressure,
    linger,
    read_some,
    readers,
    shutdown,
)

if TYPE_CHECKING:
    from socketify.server.connection import Connection

__all__ = ["Channel"]

log = logging.getLogger("socketify.error")

CLOSE_TIMEOUT = 5.0  # how long a close we started waits for the peer's close frame
STOP_CLOSE_TIMEOUT = 2.0  # ... when the server stops: shorter, the worker waits for it
LINGER_SECONDS = 1.0  # after failing the connection, how long we let the peer read our close
MESSAGES_PER_CHECK = 16  # messages of one read handled between two looks at the turn
_ids = itertools.count(1)
# The sends that carry a message (a ping or a close is not one), for the sent-message count.
_MESSAGES = frozenset((Protocol.send_text, Protocol.send_binary, Protocol.send_raw))

TextHandler = Callable[["Channel", str], Any]
BytesHandler = Callable[["Channel", bytes], Any]
BinaryTap = Callable[["Channel", bytes], bool]
CloseHandler = Callable[["Channel", int, str], Any]


class Channel:
    """A WebSocket connection; any greenlet may send; sends return a `SendStatus`."""

    __slots__ = (
        "_binary_taps",
        "_close_timer",
        "_count_received",
        "_count_sent",
        "_on_binary",
        "_on_close",
        "_on_ping",
        "_on_pong",
        "_on_stop",
        "_on_text",
        "_out",
        "_proto",
        "_reader",
        "_sock",
        "_waiter",
        "alive",
        "close_code",
        "close_on_backpressure_limit",
        "id",
        "idle_timeout",
        "locals",
        "max_backpressure",
        "on_drain",
        "subprotocol",
    )

    def __init__(
        self,
        proto: Protocol,
        subprotocol: str | None = None,
        *,
        idle_timeout: float | None = None,
        max_backpressure: int = MAX_BACKPRESSURE,
        close_on_backpressure_limit: bool = True,
    ) -> None:
        self._proto = proto
        self.subprotocol = subprotocol
        # Unique across workers and restarts of a worker: the pid plus a per-process counter.
        self.id = f"{os.getpid()}-{next(_ids)}"
        self.alive = True
        self.close_code: int | None = None
        self.idle_timeout = idle_timeout
        # Settable per channel: bytes that may wait for a slow peer before sends stop.
        self.max_backpressure = check_max_backpressure(max_backpressure)
        self.close_on_backpressure_limit = close_on_backpressure_limit
        self.locals: dict[str, Any] = {}
        self.on_drain: Callable[[Channel], Any] | None = None
        self._out = Outbound()  # held until the 101 is out; frames sent meanwhile wait in it
        self._reader: Connection | None = None
        self._sock: Any = None  # the socket `_on_readable` reads
        self._waiter: Any = None  # the connection greenlet, while it waits for the end
        self._close_timer: Any = None
        self._on_text: TextHandler | None = None
        self._on_binary: BytesHandler | None = None
        self._binary_taps: tuple[BinaryTap, ...] = ()
        self._on_ping: BytesHandler | None = None
        self._on_pong: BytesHandler | None = None
        self._on_close: list[CloseHandler] = []
        self._on_stop: list[Callable[[Channel], Any]] = []
        # Message counts for `--metrics-bind` (None, so one comparison, when it is off).
        self._count_received = counter(WEBSOCKET_MESSAGES, ("in",))
        self._count_sent = counter(WEBSOCKET_MESSAGES, ("out",))

    # -- callbacks ----------------------------------------------------------------------------

    def on_text(self, fn: TextHandler) -> TextHandler:
        """`fn(ch, text)` for each text message (replaces the previous handler)."""
        self._on_text = blocking(fn, "the Pulse on_text callback")
        return fn

    def on_binary(self, fn: BytesHandler) -> BytesHandler:
        """`fn(ch, data)` for each binary message (replaces the previous handler)."""
        self._on_binary = blocking(fn, "the Pulse on_binary callback")
        return fn

    def tap_binary(self, fn: BinaryTap) -> BinaryTap:
        """`fn(ch, data) -> consumed` sees binary messages before `on_binary` (chains; once).

        For layers such as `pulse.media`: they take the messages that are theirs and leave
        the rest, and the user's `on_binary` handler stays in place whenever it is set.
        """
        if fn not in self._binary_taps:
            self._binary_taps = (*self._binary_taps, blocking(fn, "the Pulse tap_binary callback"))
        return fn

    def on_ping(self, fn: BytesHandler) -> BytesHandler:
        """`fn(ch, payload)` for each ping; the pong has already been queued."""
        self._on_ping = blocking(fn, "the Pulse on_ping callback")
        return fn

    def on_pong(self, fn: BytesHandler) -> BytesHandler:
        """`fn(ch, payload)` for each pong."""
        self._on_pong = blocking(fn, "the Pulse on_pong callback")
        return fn

    def on_close(self, fn: CloseHandler) -> CloseHandler:
        """`fn(ch, code, reason)` once, when the connection ends (appends; all run in order)."""
        run = blocking(fn, "the Pulse on_close callback")
        if self.alive:
            self._on_close.append(run)
        else:
            run(self, self.close_code or CloseCode.ABNORMAL, "")
        return fn

    def on_stop(self, fn: Callable[[Channel], Any]) -> Callable[[Channel], Any]:
        """`fn(ch)` when a graceful stop or reload begins, before the 1001 close (appends).

        The place for a last message; the channel closes with 1001 when the callbacks return.
        """
        self._on_stop.append(blocking(fn, "the Pulse on_stop callback"))
        return fn

    # -- sending ------------------------------------------------------------------------------

    def send_text(self, text: str) -> SendStatus:
        """Send a text message: SENT, BACKPRESSURE (queued for a slow peer) or DROPPED."""
        return self._send(Protocol.send_text, text)

    def send_binary(self, data: bytes | bytearray | memoryview) -> SendStatus:
        """Send a binary message: SENT, BACKPRESSURE (queued for a slow peer) or DROPPED."""
        return self._send(Protocol.send_binary, data)

    def send_json(self, obj: Any) -> SendStatus:
        """Send `obj` as a JSON text message."""
        return self._send(Protocol.send_text, orjson.dumps(obj).decode())

    def send_frame(self, frame: bytes) -> SendStatus:
        """Send a frame encoded once elsewhere (`frame_bytes`), e.g. by a hub broadcast.

        PERF: written when the event loop's current turn ends (`Outbound.send_soon`), so the
        frames of a burst of broadcasts reach each member in one write, not one each.
        """
        return self._send(Protocol.send_raw, frame, soon=True)

    def ping(self, payload: bytes = b"") -> SendStatus:
        """Send a ping (payload ≤ 125 bytes)."""
        return self._send(Protocol.ping, payload)

    def close(self, code: int = CloseCode.NORMAL, reason: str = "") -> bool:
        """Start the close handshake; the connection ends when the peer answers or times out.

        The close frame goes out even past `max_backpressure` (it waits behind the backlog).
        """
        return self._close(code, reason, CLOSE_TIMEOUT)

    def _close(self, code: int, reason: str, timeout: float) -> bool:
        if not self._send(Protocol.close, code, reason, backpressure=False):
            return False
        if self._out.attached:  # in the handler the timer starts once the 101 is out
            self._close_timer = gevent.spawn_later(timeout, self._close_timed_out)
        return True

    def _send(
        self,
        method: Callable[..., bytes],
        *args: Any,
        backpressure: bool = True,
        soon: bool = False,
    ) -> SendStatus:
        if not self.alive:
            return DROPPED
        out = self._out
        # Checked before the frame is made: with permessage-deflate, encoding a message
        # moves the compression context, so a message dropped after that would corrupt the
        # ones that follow.
        # PERF: `pending` (a slot) bounds `backlog` (a property) from above; testing it first
        # spares the property call on every send to a peer that keeps up (hub fan-out).
        limit = self.max_backpressure
        if backpressure and out.pending > limit and out.backlog > limit:
            if self.close_on_backpressure_limit:
                self._close_slow_peer()
            return DROPPED  # the app learns it from the result (and `drain`)
        try:
            data = method(self._proto, *args)
        except LocalProtocolError:
            return DROPPED  # closing: only the close handshake may go out now
        status = out.send_soon(data) if soon else out.send(data)
        if not status:
            self._abandon()
        elif self._count_sent is not None and method in _MESSAGES:
            self._count_sent()
        return status

    def _close_slow_peer(self) -> None:
        """Close with 1008 a peer whose backlog went over the limit, and free the backlog."""
        if self._proto.state is not State.OPEN:
            return  # already closing
        # 1008 (policy violation), not 1013 (try again later): the cause is this peer not
        # reading, not a server condition that retrying would outwait.
        dropped = self._out.discard()
        log.info(
            "Pulse channel %s: its peer does not read; send backlog over %d bytes, "
            "%d bytes discarded; closing with 1008",
            self.id,
            self.max_backpressure,
            dropped,
        )
        self.close(CloseCode.POLICY_VIOLATION, "send backlog over limit: the peer does not read")

    def queued(self) -> bytes:
        """A copy of the frames waiting to be written, e.g. those sent before the 101 is out."""
        return self._out.queued()

    @property
    def pending_bytes(self) -> int:
        """Bytes sent but not yet taken by the kernel (what is compared with the limit)."""
        return self._out.pending

    # -- the connection's side ----------------------------------------------------------------

    def serve(self, conn: Connection) -> None:
        """Own `conn` until the channel ends: the connection layer calls it (`res.upgrade`).

        Runs in the connection greenlet once the 101 is out: writes the frames sent in the
        handler, reads (or lets the worker's `Readers` read) and runs the ending.
        """
        out = self._out
        out.on_drain = self._drained
        self._reader = conn
        unsubscribe = conn.service.stop_signal.subscribe(self._server_stopping)
        try:
            if not out.attach(conn):
                self._finish(CloseCode.ABNORMAL, "")
                return
            if self._proto.state is not State.OPEN and self._close_timer is None:
                self._close_timer = gevent.spawn_later(CLOSE_TIMEOUT, self._close_timed_out)
            if conn.http.buffered:
                # Frames sent right behind the upgrade request: the HTTP parser has them.
                close = self._take(read_some(conn))
                if close is not None:
                    self._ending(conn, out, close)
                    return
            if conn.scheme == "https" or self.idle_timeout:
                # TLS may hold decrypted bytes epoll cannot see; idle pings need a timer.
                close = self._read_loop(conn)
            else:
                close = self._wait_for_end(conn)
            self._ending(conn, out, close)
        finally:
            unsubscribe()
            if self._close_timer is not None:
                self._close_timer.kill(block=False)
            out.abort()
            if self.alive:
                self._finish(CloseCode.ABNORMAL, "")

    def _server_stopping(self) -> None:
        """The worker stops: last words from the `on_stop` callbacks, then close with 1001."""
        callbacks, self._on_stop = self._on_stop, []
        for fn in callbacks:
            if not self.alive:
                return
            try:
                fn(self)
            except Exception:
                log.exception("Pulse on_stop callback failed")
        if self._proto.state is State.OPEN:
            self._close(CloseCode.GOING_AWAY, "server stopping", STOP_CLOSE_TIMEOUT)

    def _take(self, data: bytes) -> Close | None:
        """Feed `data`, run the callbacks, write the protocol's replies; the Close, if any."""
        proto = self._proto
        proto.feed(data)
        close = self._dispatch()
        reply = proto.data_to_send()
        if reply:
            self._out.send(reply)
        return close

    def _read_loop(self, conn: Connection) -> Close:
        while True:
            close = self._take(self._read(conn))
            if close is not None:
                return close

    def _wait_for_end(self, conn: Connection) -> Close:
        """Let the worker's `Readers` read; park until `_on_readable` hands over the Close."""
        fd = conn.sock.fileno()
        self._sock = conn.sock
        loop = readers()
        self._waiter = gevent.getcurrent()
        loop.watch(fd, self._on_readable)
        try:
            close = gevent.get_hub().switch()
        finally:
            self._waiter = None
            loop.unwatch(fd)
        assert isinstance(close, Close), close
        return close

    def _on_readable(self) -> None:
        # Runs in a `Readers` dispatcher greenlet. PERF: the per-message path; keep it flat.
        try:
            data = self._sock.recv(READ_SIZE)
        except BlockingIOError:
            return  # a spurious wake-up: nothing to read after all
        except OSError:
            data = b""  # reset: the protocol reports 1006
        try:
            close = self._take(data)
        except GreenletExit:
            raise
        except BaseException:
            # A callback let e.g. a gevent.Timeout escape: drop this connection (its reader
            # sees EOF next), not the dispatcher that serves every other channel.
            log.exception("Pulse channel failed; dropping the connection")
            self._abandon()
            return
        if close is not None and self._waiter is not None:
            readers().unwatch(self._sock.fileno())
            waiter, self._waiter = self._waiter, None
            gevent.get_hub().loop.run_callback(waiter.switch, close)

    def _read(self, conn: Connection) -> bytes:
        idle = self.idle_timeout
        if not idle:
            return read_some(conn, wait_first=True)
        # Idle connections get a ping; one that stays silent for another period is gone.
        with gevent.Timeout(idle, False):
            return read_some(conn, wait_first=True)
        if self.ping(b"idle"):
            with gevent.Timeout(idle, False):
                return read_some(conn, wait_first=True)
        # Say why before dropping it: our close frame (1001, going away), then the end of
        # input, which the protocol reports with our code; no wait for an answer that a
        # silent peer will not send (the ending lingers briefly so the frame is not reset).
        self._send(Protocol.close, CloseCode.GOING_AWAY, "idle timeout", backpressure=False)
        return b""

    def _dispatch(self) -> Close | None:
        # PERF: a plain loop over next_event, not the `events()` generator: this runs once
        # per message received, and the generator costs a frame and a type check per event.
        next_event = self._proto.next_event
        reader = self._reader
        # One read can hold thousands of small messages: a peer sending them without pause
        # takes turns with the worker's other connections (server.turns). PERF: a look every
        # few messages; one read of a ping-pong peer holds one message and never looks.
        check_turn = reader.turn.check if reader is not None else None
        handled = 0
        while True:
            event = next_event()
            if event is NEED_DATA or event is CLOSED:
                return None
            handled += 1
            if handled == MESSAGES_PER_CHECK and check_turn is not None:
                handled = 0
                check_turn()
            cls = type(event)
            if (cls is TextMessage or cls is BinaryMessage) and self._count_received is not None:
                self._count_received()
            try:
                if cls is TextMessage:
                    if self._on_text is not None:
                        self._on_text(self, event.text)  # type: ignore[union-attr]
                elif cls is BinaryMessage:
                    data = event.data  # type: ignore[union-attr]
                    if self._binary_taps and any(tap(self, data) for tap in self._binary_taps):
                        continue
                    if self._on_binary is not None:
                        self._on_binary(self, data)
                elif cls is Ping:
                    if self._on_ping is not None:
                        self._on_ping(self, event.payload)  # type: ignore[union-attr]
                elif cls is Pong:
                    if self._on_pong is not None:
                        self._on_pong(self, event.payload)  # type: ignore[union-attr]
                elif cls is Close:
                    return event  # type: ignore[return-value]
            except Exception:
                log.exception("Pulse callback failed; closing with 1011")
                self.close(CloseCode.INTERNAL_ERROR, "internal error")

    def _ending(self, conn: Connection, out: Outbound, close: Close) -> None:
        self._finish(close.code, close.reason)
        out.wait_flushed(LINGER_SECONDS)
        if not close.clean:
            linger(conn, LINGER_SECONDS)  # our close frame must reach the peer, not a reset

    def _close_timed_out(self) -> None:
        reader = self._reader
        if reader is not None and self.alive:
            shutdown(reader)  # the reader sees EOF; the protocol reports our own close code

    def _abandon(self) -> None:
        reader = self._reader
        if reader is not None:
            shutdown(reader)

    def _drained(self) -> None:
        if self.on_drain is not None:
            try:
                self.on_drain(self)
            except Exception:
                log.exception("Pulse drain callback failed")

    def _finish(self, code: int, reason: str) -> None:
        if not self.alive:
            return
        self.alive = False
        self.close_code = code
        callbacks, self._on_close = self._on_close, []
        for fn in callbacks:
            try:
                fn(self, code, reason)
            except Exception:
                log.exception("Pulse on_close callback failed")
