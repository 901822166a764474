"""Server-Sent Events: `stream = sse.upgrade(req, res)`, and `sse.Hub` rooms across workers.

Theory of operation. `upgrade` answers 200 `text/event-stream` with `Connection: close` (the
body ends when the connection does, so no chunking and HTTP/1.0 works too) and hands the
socket to the stream once the handler chain has returned. Events sent before that are queued
and written right after the headers. Afterwards the connection greenlet only reads, discarding
what the client sends, so a peer that goes away is noticed at once, not at the next write;
writes come from any greenlet through `Outbound` and never interleave.

Writes return a `SendStatus`. What waits for a client that reads slower than we send is
bounded by `max_backpressure` (1 MiB by default, as for Pulse): a write that finds more than
that waiting is DROPPED and the stream is closed at once (the backlog discarded, the socket
shut down). An event stream has no way to say why, and needs none: the browser's
`EventSource` reconnects and resumes from `Last-Event-ID`, which is the recovery a client
that fell behind wants anyway; a dropped event in the middle of a live stream would instead
be lost without anyone knowing.

A graceful stop or reload of the worker ends every stream: its `on_stop` callbacks run first
(the place for a last event, such as a `retry` hint that spreads the reconnections out),
then what was sent is flushed (for `STOP_FLUSH` at most) and the connection closes. The
browser reconnects to a worker that is still serving.

`Hub` rooms span workers: a broadcast encodes the event once and publishes the bytes once on
the cross-worker bus; each worker writes them to its own members of the room, each write
bounded like any other. The rooms are `socketify.realtime.rooms.Rooms`, shared with Pulse;
this module only says how an event stream is written to and heard closing.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gevent

from socketify.realtime.rooms import Rooms, Sender
from socketify.server.upgraded import (
    DROPPED,
    MAX_BACKPRESSURE,
    UNBOUNDED,
    Outbound,
    SendStatus,
    check_max_backpressure,
    read_some,
    shutdown,
)

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response
    from socketify.server.connection import Connection

__all__ = [
    "MAX_BACKPRESSURE",
    "UNBOUNDED",
    "EventStream",
    "Hub",
    "SendStatus",
    "encode_event",
    "upgrade",
]

log = logging.getLogger("socketify.error")

# The event-stream grammar ends a line at CRLF, LF or CR; a data line holding any of them
# would end early, so each becomes its own `data:` line.
_LINES = re.compile(r"\r\n|\r|\n")
_FLUSH_ON_CLOSE = 5.0  # seconds close() waits for the backlog before dropping it
STOP_FLUSH = 2.0  # ... when the server stops: shorter, the worker waits for it
_ids = itertools.count(1)


def _field(name: str, value: str) -> str:
    # Field values of one line only: a newline in an event name or id would forge fields.
    return f"{name}: {_LINES.sub(' ', value)}\n"


def encode_event(
    data: str | bytes = "", event: str | None = None, id: str | int | None = None
) -> bytes:
    """The wire form of one event: `id:`, `event:`, one `data:` line per line, a blank line."""
    if isinstance(data, bytes):
        data = data.decode("utf-8")
    head = ""
    if id is not None:
        head += _field("id", str(id))
    if event:
        head += _field("event", event)
    # Most events are one line; the regex split costs ~0.5 ms on 64 KiB, the test ~1 µs.
    lines = _LINES.split(data) if "\n" in data or "\r" in data else (data,)
    body = "".join([f"data: {line}\n" for line in lines])
    return (head + body + "\n").encode("utf-8")


class EventStream:
    """One SSE connection; any greenlet of the worker may send; sends return a `SendStatus`."""

    __slots__ = (
        "_closing",
        "_on_close",
        "_on_stop",
        "_out",
        "_reader",
        "alive",
        "heartbeat",
        "id",
        "last_event_id",
        "max_backpressure",
    )

    def __init__(
        self,
        last_event_id: str | None,
        heartbeat: float | None,
        max_backpressure: int = MAX_BACKPRESSURE,
    ) -> None:
        self.id = f"{os.getpid()}-{next(_ids)}"
        self.last_event_id = last_event_id
        self.heartbeat = heartbeat
        # Settable per stream: bytes that may wait for a slow client before it is closed.
        self.max_backpressure = check_max_backpressure(max_backpressure)
        self.alive = True
        self._closing = False
        self._out = Outbound()  # held until the head is out; events sent meanwhile wait
        self._reader: Connection | None = None
        self._on_close: list[Callable[[EventStream], Any]] = []
        self._on_stop: list[Callable[[EventStream], Any]] = []

    # -- sending ----------------------------------------------------------------------------

    def send(self, data: str | bytes) -> SendStatus:
        """Send an unnamed event (`message` in the browser)."""
        if not self.writable:
            return DROPPED  # not worth encoding
        return self.write(encode_event(data))

    def send_event(
        self, event: str | None, data: str | bytes, id: str | int | None = None
    ) -> SendStatus:
        """Send a named event with an optional id (the browser's lastEventId)."""
        if not self.writable:
            return DROPPED
        return self.write(encode_event(data, event, id))

    def comment(self, text: str = "") -> SendStatus:
        """Send a comment line, ignored by clients; keeps proxies from timing out."""
        return self.write(f": {_LINES.sub(' ', text)}\n\n".encode())

    def retry(self, ms: int) -> SendStatus:
        """Tell the client how long to wait before reconnecting."""
        return self.write(f"retry: {int(ms)}\n\n".encode())

    def write(self, data: bytes) -> SendStatus:
        """Write pre-encoded event bytes (what `encode_event` returns).

        SENT, BACKPRESSURE (waiting for a slow client) or DROPPED (the stream is closed, or
        more than `max_backpressure` was waiting: then it is closed now).
        """
        if not self.writable:
            return DROPPED
        out = self._out
        if out.backlog > self.max_backpressure:
            self._close_slow_client()
            return DROPPED
        status = out.send(data)
        if not status:
            self._gone()
        return status

    def _close_slow_client(self) -> None:
        """Close at once a stream whose client stopped reading; give its backlog back."""
        self._closing = True
        dropped = self._out.discard()
        log.info(
            "SSE stream %s: its client does not read; send backlog over %d bytes, "
            "%d bytes discarded; closing",
            self.id,
            self.max_backpressure,
            dropped,
        )
        if self._reader is not None:
            shutdown(self._reader)  # the reading greenlet wakes with EOF and ends the stream

    @property
    def writable(self) -> bool:
        """False once the stream is closed or closing: sends return DROPPED."""
        return self.alive and not self._closing

    @property
    def pending_bytes(self) -> int:
        """Bytes sent but not yet taken by the kernel (a slow reader's backlog)."""
        return self._out.pending

    def on_close(self, fn: Callable[[EventStream], Any]) -> None:
        """Call `fn(stream)` once when the connection ends (hubs use it to drop members)."""
        if self.alive:
            self._on_close.append(fn)
        else:
            fn(self)

    def on_stop(self, fn: Callable[[EventStream], Any]) -> None:
        """Call `fn(stream)` when a graceful stop or reload begins, before the stream ends.

        The place for a last event; the stream is flushed and closed when the callbacks
        return (the browser's `EventSource` then reconnects to a worker still serving).
        """
        self._on_stop.append(fn)

    def close(self) -> None:
        """Flush what was sent, then close the connection."""
        self._close(_FLUSH_ON_CLOSE)

    def _close(self, flush_timeout: float) -> None:
        if self._closing or not self.alive:
            return
        self._closing = True
        out, conn = self._out, self._reader
        if conn is None:
            return  # still in the handler: the connection closes after flushing the queue
        if not out.wait_flushed(flush_timeout):
            log.debug("SSE stream %s closed with a backlog", self.id)
        shutdown(conn)  # the reading greenlet wakes with EOF and ends the connection

    # -- the connection's side ----------------------------------------------------------------

    def serve(self, conn: Connection) -> None:
        """Own `conn` until the stream ends: the connection layer calls it (`res.upgrade`).

        Runs in the connection greenlet once the head is out: writes what was sent in the
        handler, then reads (and discards) until the client goes away or `close` shuts down.
        """
        out = self._out
        self._reader = conn
        if not out.attach(conn):
            self._gone()
            return
        beat = gevent.spawn(self._beat) if self.heartbeat else None
        unsubscribe = conn.service.stop_signal.subscribe(self._server_stopping)
        try:
            if self._closing:
                out.wait_flushed(_FLUSH_ON_CLOSE)
                return
            while read_some(conn):
                pass  # what a client sends on an event stream means nothing: discarded
        finally:
            unsubscribe()
            if beat is not None:
                beat.kill(block=False)
            out.abort()
            self._gone()

    def _server_stopping(self) -> None:
        """The worker stops: last events from the `on_stop` callbacks, then the end."""
        callbacks, self._on_stop = self._on_stop, []
        for fn in callbacks:
            if not self.writable:
                return
            try:
                fn(self)
            except Exception:
                log.exception("SSE on_stop callback failed")
        self._close(STOP_FLUSH)

    def _beat(self) -> None:
        assert self.heartbeat is not None
        while self.alive:
            gevent.sleep(self.heartbeat)
            if not self.comment("heartbeat"):
                return

    def _gone(self) -> None:
        if not self.alive:
            return
        self.alive = False
        callbacks, self._on_close = self._on_close, []
        for fn in callbacks:
            try:
                fn(self)
            except Exception:
                log.exception("SSE on_close callback failed")


def upgrade(
    req: Request,
    res: Response,
    heartbeat: float | None = None,
    *,
    max_backpressure: int = MAX_BACKPRESSURE,
) -> EventStream:
    """Turn this response into an event stream; `heartbeat` sends a comment every N seconds.

    `max_backpressure` (bytes, default `MAX_BACKPRESSURE` = 1 MiB; `UNBOUNDED` for none)
    bounds what may wait for a client that reads slower than we send, events written in the
    handler included. A write that finds more than that waiting returns DROPPED and closes
    the stream at once (the client's `EventSource` reconnects with `Last-Event-ID`), so a
    stalled client costs at most the bound plus the event that crossed it. The same figure
    as Pulse's, for the same reasons (uWebSockets bounds at 64 KiB and drops; Node's `ws`
    does not bound at all); see `pulse.upgrade`.
    """
    res.status(200)
    res.set_header("Content-Type", "text/event-stream; charset=utf-8")
    res.set_header("Cache-Control", "no-cache")
    res.set_header("X-Accel-Buffering", "no")
    last = req.header("Last-Event-ID") or None
    stream = EventStream(last, heartbeat, max_backpressure)
    if res.head_only:
        # HEAD: the same headers, no body, and no stream to keep open.
        stream.alive = False
        res.upgrade = _headers_only
    else:
        res.upgrade = stream.serve
    return stream


def _headers_only(conn: Connection) -> None:
    """The upgrade of a HEAD request: the head is written; close at once."""


class Hub(Rooms[EventStream]):
    """Rooms of event streams; broadcasts reach the members on every worker through the bus."""

    def __init__(self, name: str = "sse", bus: Any = None) -> None:
        super().__init__(name, bus)

    def sender_for(self, member: EventStream) -> Sender:
        """`member.write`: event bytes written as they are, bounded by its `max_backpressure`."""
        return member.write

    def watch_close(self, member: EventStream, gone: Callable[[EventStream], object]) -> None:
        """Call `gone(member)` from the stream's `on_close`."""
        member.on_close(gone)

    def broadcast(
        self,
        room: str,
        data: str | bytes,
        event: str | None = None,
        id: str | int | None = None,
    ) -> None:
        """Send one event, encoded once, to every member of `room` on every worker."""
        self.publish(room, encode_event(data, event, id))
