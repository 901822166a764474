"""One HTTP/2 connection: the socket's bytes through `Http2ServerConnection`, a greenlet a stream.

Theory of operation. A `Connection` hands its socket over (after TLS chose `h2` by ALPN, or when
a cleartext connection opened with the HTTP/2 preface) and its greenlet becomes the session's
reader: it feeds what it receives to the sans-IO protocol and routes the events to the
streams, each of which runs the app in its own greenlet (`http2_stream.Stream`). The protocol
is shared by those greenlets; gevent never switches inside one of its calls, so none of them
sees it half-changed.

Writes are batched per turn of the event loop: whoever queues frames asks for a flush, which
runs once at the end of the turn and writes everything queued by then in one send (a hundred
answers finished in one turn cost one syscall). What the kernel does not take goes to one
writer greenlet; while its backlog is over `HIGH_WATER`, senders wait (bounded by the send
timeout), so a client that stops reading parks its streams instead of growing the worker.

A client whose frames are always there never makes the reader wait: between reads it takes
turns with the worker's other connections (`server.turns`), and the protocol's budgets end a
connection that floods frames which carry nothing (`protocol.http2.limits`).

What one connection may hold for streams its client does not read is bounded too. An answer
waiting for send window (a client that opens a hundred streams and reads none) keeps its
bytes until the client takes them or `http2_send_timeout` resets the stream; the session
counts those bytes (`hold`/`release`), and once they pass `MAX_HELD` the streams that have
not run their handler yet wait, one at a time, before producing more (`wait_for_room`).

Deadlines reuse the connection's: with no stream open the connection's deadline is
`idle_timeout`, and the sweeper's `Expired` makes the reader say GOAWAY and close. A stopping
server (`stop`) says GOAWAY at once, serves the streams already opened, then closes the same
way; `HttpService.stop` bounds that by `graceful_timeout`.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import gevent
from gevent.event import Event
from gevent.lock import Semaphore

from socketify.protocol.http2 import (
    BodyData,
    ConnectionTerminated,
    Http2Limits,
    Http2ServerConnection,
    PeerGoingAway,
    RequestOpened,
    StreamEnded,
    StreamReset,
    WindowOpened,
)
from socketify.server.errors import Expired, PeerGone
from socketify.server.http2_stream import Stream
from socketify.server.upgraded import linger

if TYPE_CHECKING:
    from socketify.core.options import ServerOptions
    from socketify.server.connection import Connection

__all__ = ["HIGH_WATER", "MAX_HELD", "Http2Session", "limits_for"]

log = logging.getLogger("socketify.error")

READ_SIZE = 65536
HIGH_WATER = 256 * 1024  # bytes waiting for the socket past which senders wait
# Bytes of answers one connection holds for its client (waiting for send window) past which
# streams that have not run their handler yet wait.
MAX_HELD = 4 << 20
_CLOSE_FLUSH = 1.0  # seconds a closing session gives its last frames to go out
_MAX_BUFFERS = 256  # buffers one vectored write takes (the kernel's limit is 1024)
_monotonic = time.monotonic


def _unsent(buffers: list[bytes | memoryview], sent: int) -> list[bytes | memoryview]:
    """The buffers, or the parts of them, that the first `sent` bytes did not cover."""
    for index, buffer in enumerate(buffers):
        if sent < len(buffer):
            return [buffer[sent:], *buffers[index + 1 :]]
        sent -= len(buffer)
    return []


def limits_for(options: ServerOptions) -> Http2Limits:
    """The protocol's bounds from the server's options."""
    return Http2Limits(
        max_concurrent_streams=options.http2_max_concurrent_streams,
        max_header_list_size=options.max_header_size,
        max_frame_size=options.http2_max_frame_size,
        max_resets_per_second=options.http2_max_resets_per_second,
        max_settings_per_second=options.http2_max_settings_per_second,
        max_pings_per_second=options.http2_max_pings_per_second,
    )


class Http2Session:
    """Serves one connection that speaks HTTP/2, in the connection's greenlet."""

    __slots__ = (
        "_backlog",
        "_drained",
        "_flush_scheduled",
        "_loop",
        "_one_at_a_time",
        "_room",
        "_streams_gone",
        "_writer",
        "backlog_bytes",
        "conn",
        "held",
        "options",
        "proto",
        "stopping",
        "streams",
    )

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.options = conn.service.options
        self.proto = Http2ServerConnection(limits_for(self.options))
        self.streams: dict[int, Stream] = {}
        self.stopping = False
        self.backlog_bytes = 0  # bytes the kernel has not taken yet
        self._backlog: deque[bytes | memoryview] = deque()
        self._writer: Any = None  # the greenlet writing the backlog, while there is one
        self._drained = Event()
        self._drained.set()
        self._flush_scheduled = False
        self._loop = gevent.get_hub().loop
        self.held = 0  # bytes of answers the streams hold for the client (see MAX_HELD)
        self._room = Event()  # set while `held` is within MAX_HELD
        self._room.set()
        self._one_at_a_time = Semaphore()  # streams waiting for room pass one by one
        self._streams_gone: Event | None = None  # set by _end, while it waits for the streams

    # -- reading ------------------------------------------------------------------------------

    def serve(self, data: bytes) -> None:
        """Serve until the client leaves or the connection ends; `data` was read already."""
        conn = self.conn
        conn.deadline = _monotonic() + self.options.idle_timeout
        if conn.service.stopping:
            self.stop()
        try:
            if data:
                self._receive(data)
            self.flush()
            check_turn = conn.turn.check
            while not self.proto.closed:
                try:
                    data = self._read()
                except Expired:
                    if self._expired():
                        break
                    continue
                if not data:
                    break
                self._receive(data)
                self.flush()
                check_turn()  # frames that are always there must not hold the worker
        except (PeerGone, ConnectionError):
            pass
        finally:
            self._end()

    def _read(self) -> bytes:
        conn = self.conn
        sock = conn.sock
        while True:
            try:
                return sock.recv(READ_SIZE)
            except BlockingIOError:
                conn.wait_readable()
            except OSError:
                return b""

    def _receive(self, data: bytes) -> None:
        streams = self.streams
        for event in self.proto.receive_data(data):
            if isinstance(event, BodyData):
                stream = streams.get(event.stream_id)
                if stream is not None:
                    stream.body_data(event.data, event.flow_length)
            elif isinstance(event, RequestOpened):
                self._open(event)
            elif isinstance(event, StreamEnded):
                stream = streams.get(event.stream_id)
                if stream is not None:
                    stream.body_ended(event.trailers)
            elif isinstance(event, WindowOpened):
                self._window_opened(event.stream_id)
            elif isinstance(event, StreamReset):
                stream = streams.get(event.stream_id)
                if stream is not None:
                    stream.gone()
            elif isinstance(event, PeerGoingAway):
                self.stop()  # the client opens no more streams: answer the open ones, close
            elif isinstance(event, ConnectionTerminated) and not event.by_peer:
                log.info("HTTP/2 client %s: %s", self.conn.addr, event.detail)
            # After a GOAWAY of ours for bad input the protocol takes and sends nothing
            # more, so `serve` ends the session.

    def _open(self, event: RequestOpened) -> None:
        if not self.streams:
            self.conn.deadline = None  # busy: each stream keeps its own time
        stream = Stream(self, event.stream_id, event.head, event.ended)
        self.streams[event.stream_id] = stream
        # PERF: a raw greenlet (as each connection's is): gevent's Greenlet costs more to make
        # than the rest of a small request's stream; `_end` kills them with gevent.kill.
        stream.greenlet = gevent.spawn_raw(stream.run)

    def _window_opened(self, stream_id: int) -> None:
        if stream_id:
            stream = self.streams.get(stream_id)
            if stream is not None:
                stream.window_opened()
        else:
            for stream in list(self.streams.values()):
                stream.window_opened()

    def stream_done(self, stream: Stream) -> None:
        """A stream's greenlet is over: free its place; an idle connection starts its clock."""
        self.streams.pop(stream.stream_id, None)
        self.proto.finished(stream.stream_id, drain=stream.unread_is_small)
        self.schedule_flush()
        self.conn.service.request_done()
        if not self.streams:
            now = _monotonic()
            self.conn.deadline = now if self.stopping else now + self.options.idle_timeout
            if self._streams_gone is not None:
                self._streams_gone.set()

    def _expired(self) -> bool:
        """The connection's deadline passed; True when the session should end now."""
        if self._writer is not None and self.backlog_bytes:
            return True  # the client has read nothing for idle_timeout
        return not self.streams

    # -- what the streams hold ----------------------------------------------------------------

    def hold(self, size: int) -> None:
        """A stream holds `size` bytes of its answer until the client takes them."""
        self.held += size
        if self.held > MAX_HELD:
            self._room.clear()

    def release(self, size: int) -> None:
        """A stream no longer holds `size` bytes (sent, or given up)."""
        self.held -= size
        if self.held <= MAX_HELD:
            self._room.set()

    def wait_for_room(self) -> None:
        """Park a stream about to run its handler while the connection holds too much.

        The waiters pass one at a time, each straight on to its handler: one that does not
        wait has added what it holds before the next looks at the count again, so a crowd
        let through at once cannot overshoot the bound by an answer each.
        """
        if self.held <= MAX_HELD:
            return
        with self._one_at_a_time:
            while self.held > MAX_HELD:
                self._room.wait()

    # -- stopping -----------------------------------------------------------------------------

    def stop(self) -> None:
        """The server stops: GOAWAY now, finish the streams opened, then close."""
        if self.stopping:
            return
        self.stopping = True
        self.proto.goaway()
        self.schedule_flush()
        if not self.streams:
            self.conn.deadline = _monotonic()

    def _end(self) -> None:
        """Close: cancel what still runs, then a last flush with the final GOAWAY."""
        running = [
            stream.greenlet
            for stream in self.streams.values()
            if stream.greenlet is not None and not stream.greenlet.dead
        ]
        if running:
            # Each killed stream ends in `stream_done`, which says when none is left.
            self._streams_gone = Event()
            for glet in running:
                gevent.kill(glet)
            self._streams_gone.wait(1.0)
        self.streams.clear()
        self.proto.close()
        try:
            self.flush()
            if self._writer is not None:
                self._writer.join(_CLOSE_FLUSH)
            # A client still sending (a flood we cut off) would have the kernel answer its
            # bytes with a reset that destroys our GOAWAY before it is read: drain a moment.
            linger(self.conn, _CLOSE_FLUSH)
        except (PeerGone, OSError):
            pass

    # -- writing ------------------------------------------------------------------------------

    def schedule_flush(self) -> None:
        """Write what the protocol queued at the end of this loop turn, with what follows."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.run_callback(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        self.flush()

    def flush(self) -> None:
        """Write what the protocol queued, now; a rest the kernel refuses goes to the writer."""
        buffers = self.proto.buffers_to_send()
        if not buffers:
            return
        size = sum(map(len, buffers))
        if self._writer is not None:
            self._backlog.extend(buffers)
            self.backlog_bytes += size
            return
        conn = self.conn
        sock = conn.sock
        tls = conn.scheme == "https"
        try:
            if tls or len(buffers) > _MAX_BUFFERS:
                buffers = [b"".join(buffers)]
                sent = sock.send(buffers[0])
            else:
                # PERF: one vectored write: a file's or a body's slices reach the kernel
                # without first being joined into one string (a copy of the whole answer).
                sent = sock.sendmsg(buffers)
        except BlockingIOError:
            sent = 0
        except OSError:
            return  # the reader sees the connection gone
        if sent < size or (tls and sock.unsent):
            rest = _unsent(buffers, sent) or [b""]  # b"": the writer only drains the TLS layer
            self._backlog.extend(rest)
            self.backlog_bytes += size - sent
            self._drained.clear()
            self._writer = gevent.spawn(self._write_backlog)

    def _write_backlog(self) -> None:
        conn = self.conn
        backlog = self._backlog
        try:
            while backlog:
                data = backlog.popleft()
                conn.send(data)  # parks only this greenlet while the kernel's buffer is full
                self.backlog_bytes -= len(data)
                if self.streams:
                    # The stalled-reader deadline conn.send armed is over; streams keep
                    # their own time (with none open it stands as the idle deadline).
                    conn.deadline = None
        except (PeerGone, OSError):
            backlog.clear()
            self.backlog_bytes = 0
        finally:
            self._writer = None
            self._drained.set()

    @property
    def room(self) -> int:
        """Bytes a sender that must not wait may still queue (none past HIGH_WATER)."""
        return HIGH_WATER - self.backlog_bytes

    def wait_drained(self, timeout: float) -> bool:
        """Park the caller while the backlog is over HIGH_WATER; False if it stayed so.

        Many streams may wait at once: the first to wake can fill the backlog again before
        the others run, so each waits on until its own timeout, not just the first drain.
        """
        if self.backlog_bytes <= HIGH_WATER:
            return True
        deadline = _monotonic() + timeout
        while self.backlog_bytes > HIGH_WATER:
            left = deadline - _monotonic()
            if left <= 0 or not self._drained.wait(left):
                return False
        return True
