"""Writing to and reading from a connection after `res.upgrade` took it over (SSE, Pulse).

Theory of operation. Once upgraded, the connection greenlet only reads (it is the one that
notices the peer leaving), while any greenlet of the worker may write. `Outbound` makes the
writes safe without ever parking the caller: a send first tries the socket directly (the
common case costs one syscall and no switch); whatever the kernel does not take goes to one
flusher greenlet, and later sends queue behind it, so bytes of two senders never interleave
and arrive in the order they were handed over. A hub fan-out to a thousand members therefore
never waits for the slowest one. Until the handler has returned (the head is not out yet)
the `Outbound` is held: sends queue and go out right behind the head once `attach` is called.

The queue is the backlog of a peer that reads slower than we send; `backlog` measures it and
the owner (`Channel`, `EventStream`) bounds it: past its limit it drops further messages or
closes the connection. The queue only ever holds whole messages (the one part-written message
belongs to the flusher), so an owner that gives up on a peer can `discard` them and still put
a well-framed last word (a WebSocket close frame) behind the one in flight.

`send_soon` is the broadcast variant: the bytes wait (corked) until the current turn of the
event loop ends, so every frame a burst of broadcasts hands to one member in that turn goes
out in one write. A thousand members and twenty queued broadcasts then cost a thousand
syscalls instead of twenty thousand; later `send`s queue behind the corked bytes. A cork
holds at most `CORK_BYTES`; past that it is written at once, so corked bytes (which do not
count as backlog: the peer has not refused them) stay bounded too.

`Readers` is the read side for many connections at once (Pulse uses it for plain-TCP
channels): their sockets sit in one epoll set whose fd is the only thing libev watches, and
one dispatcher greenlet wakes per loop turn, polls the set and runs the handler of every
ready connection in a row. That replaces a libev callback and two greenlet switches per
message with one of each per batch. Handlers run user code, which may block
(cooperatively); the dispatcher notices when libev reports more input while it is parked
outside its own wait: the handler it is in has blocked. The blocked connection then leaves
the epoll set (so nothing else reads it; its messages stay in order), a fresh dispatcher
takes over the others, and the old one, once its handler returns, puts the connection back
and ends.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import sys
import time
import weakref
from collections import deque
from collections.abc import Callable
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Final

import gevent
from gevent.monkey import get_original
from greenlet import getcurrent, greenlet

from socketify.server.connection import READ_SIZE, PeerGone

if TYPE_CHECKING:
    from socketify.server.connection import Connection

__all__ = [
    "MAX_BACKPRESSURE",
    "UNBOUNDED",
    "Outbound",
    "Readers",
    "SendStatus",
    "check_max_backpressure",
    "read_some",
    "readers",
]

log = logging.getLogger("socketify.error")

# Ready connections one dispatcher turn serves at most before the loop runs everything else
# once (the rest stay ready; epoll hands them out round-robin).
BATCH = 256


class SendStatus(IntEnum):
    """What a send did, as uWebSockets reports it; falsy only when nothing was sent.

    `SENT` equals `True` and `DROPPED` equals `False`, so code that treated the result as a
    bool keeps working; `BACKPRESSURE` is truthy too (the message will go out).
    """

    DROPPED = 0  # not sent: the connection is closed or closing, or its backlog is full
    SENT = 1  # the kernel took it (or it goes out at the end of the handler or loop turn)
    BACKPRESSURE = 2  # accepted, but it waits in the backlog: the peer reads slower than we send


# PERF: an Enum member lookup costs ~0.14 µs, more than the rest of a send; use these.
SENT: Final = SendStatus.SENT
BACKPRESSURE: Final = SendStatus.BACKPRESSURE
DROPPED: Final = SendStatus.DROPPED

# The default bound of a connection's backlog (`max_backpressure`, SSE's too). uWebSockets
# defaults to 64 KiB and, past it, silently drops messages; Node's `ws` has no bound at all
# (it reports `bufferedAmount` and leaves the policy to the app). We close the connection
# instead of dropping (a protocol with history must not lose messages silently), so the bound
# is more generous than uWebSockets': a healthy client behind a slow link that absorbs a
# burst is not cut off, while a client that stopped reading costs at most this much plus the
# message that crossed it (load_tests/faults.py `slow-reader` measures it per client).
MAX_BACKPRESSURE = 1 << 20
# Ask for no bound explicitly: `max_backpressure=UNBOUNDED` (the app then owns the memory).
UNBOUNDED = sys.maxsize
CORK_BYTES = 64 * 1024  # a cork bigger than this is written at once (see the module doc)


def check_max_backpressure(value: object) -> int:
    """`value` as a backlog bound in bytes; ValueError for anything but a positive int."""
    if value is None:
        raise ValueError(
            "max_backpressure=None no longer means unbounded: give a byte count "
            f"(default {MAX_BACKPRESSURE}), or UNBOUNDED to ask for no bound"
        )
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_backpressure must be a positive number of bytes, not {value!r}")
    return value


class Outbound:
    """The write side of an upgraded connection: non-blocking sends, one flusher, FIFO order."""

    __slots__ = ("_conn", "_corked", "_flusher", "_queue", "closed", "on_drain", "pending")

    def __init__(self) -> None:
        self._conn: Connection | None = None  # None while held (the handler still runs)
        self._queue: deque[bytes] = deque()  # whole messages only (see the module doc)
        self._flusher: Any = None
        self._corked = False  # bytes in the queue wait for the end of this loop turn
        self.pending = 0  # bytes handed to us that the kernel has not taken yet
        self.closed = False
        self.on_drain: Callable[[], None] | None = None  # called when a backlog is gone

    @property
    def attached(self) -> bool:
        """True once `attach` gave us the connection (the handler has returned)."""
        return self._conn is not None

    def attach(self, conn: Connection) -> SendStatus:
        """Start writing to `conn`, first what was sent while held; DROPPED if it is dead."""
        self._conn = conn
        queue = self._queue
        if self.closed or not queue:
            return DROPPED if self.closed else SENT
        data = b"".join(queue)
        queue.clear()
        self.pending = 0
        return self._write(data)

    def send(self, data: bytes) -> SendStatus:
        """Write `data` after everything sent before it (never parks the caller)."""
        if self.closed:
            return DROPPED
        if self._flusher is not None:
            self._queue.append(data)
            self.pending += len(data)
            return BACKPRESSURE
        if self._corked or self._conn is None:
            self._queue.append(data)
            self.pending += len(data)
            if self._corked and self.pending >= CORK_BYTES:
                return self._uncork()
            return SENT
        return self._write(data)

    def send_soon(self, data: bytes) -> SendStatus:
        """`send`, but written when this loop turn ends, with the rest sent to us meanwhile."""
        if self.closed:
            return DROPPED
        self._queue.append(data)
        self.pending += len(data)
        if self._corked:  # the usual case within a burst of broadcasts
            return SENT if self.pending < CORK_BYTES else self._uncork()
        if self._flusher is not None:
            return BACKPRESSURE
        if self._conn is None:
            return SENT  # held: goes out behind the head
        self._corked = True
        gevent.get_hub().loop.run_callback(self._uncork)
        return SENT

    def _uncork(self) -> SendStatus:
        self._corked = False
        queue = self._queue
        if self.closed or self._flusher is not None or not queue:
            return SENT  # gone, or a flusher (which drains the queue) took over
        data = queue[0] if len(queue) == 1 else b"".join(queue)
        queue.clear()
        self.pending -= len(data)
        status = self._write(data)
        if not status:
            shutdown(self._conn)  # type: ignore[arg-type]  # the reader sees EOF and ends
        return status

    def _write(self, data: bytes) -> SendStatus:
        """Try the socket now; what the kernel does not take goes to a new flusher."""
        conn = self._conn
        assert conn is not None
        sock = conn.sock
        try:
            sent = sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.closed = True
            return DROPPED
        tls_unsent = conn.scheme == "https" and bool(sock.unsent)
        if sent < len(data) or tls_unsent:
            rest = data[sent:]  # may be b"": the flusher then only drains the TLS layer
            self.pending += len(rest)
            self._flusher = gevent.spawn(self._flush, rest)
            return BACKPRESSURE
        return SENT

    def _flush(self, data: bytes) -> None:
        conn = self._conn
        assert conn is not None
        queue = self._queue
        try:
            while True:
                conn.send(data)  # parks only this greenlet while the kernel buffer is full
                self.pending -= len(data)
                # A blocked send arms the stalled-reader deadline; it is over now.
                conn.deadline = None
                if not queue:
                    break
                data = queue.popleft()
        except (PeerGone, OSError):
            self.closed = True
            queue.clear()
            self.pending = 0
        finally:
            self._flusher = None
        if not self.closed and self.on_drain is not None:
            self.on_drain()

    @property
    def backlog(self) -> int:
        """Bytes waiting for the peer to read: refused by the kernel, or held for the head.

        Corked bytes are not counted (the kernel has not refused them, and `CORK_BYTES`
        bounds them); while corked there is no flusher, so everything pending is corked.
        """
        return 0 if self._corked else self.pending

    @property
    def flushing(self) -> bool:
        """True while a backlog is being written."""
        return self._flusher is not None

    def queued(self) -> bytes:
        """A copy of the whole messages waiting in the queue, in order (not the one in flight)."""
        return b"".join(self._queue)

    def discard(self) -> int:
        """Drop the messages still waiting whole (not the one being written); bytes dropped."""
        queue = self._queue
        dropped = sum(map(len, queue))
        queue.clear()
        self.pending -= dropped
        return dropped

    def wait_flushed(self, timeout: float) -> bool:
        """Park the caller until the backlog is written (or `timeout`); True if it was."""
        if self._corked:
            self._uncork()  # now, not at the end of the turn: the caller is about to close
        flusher = self._flusher
        if flusher is not None and flusher is not gevent.getcurrent():
            flusher.join(timeout)
        return self._flusher is None

    def abort(self) -> None:
        """Stop writing for good; called by the connection greenlet before the socket closes."""
        self.closed = True
        flusher = self._flusher
        if flusher is not None and flusher is not gevent.getcurrent():
            # Kill and wait: its watcher must be released before the connection closes it.
            flusher.kill(block=True, timeout=1.0)
        self._queue.clear()
        self.pending = 0


def read_some(conn: Connection, wait_first: bool = False) -> bytes:
    """The next bytes from the peer (b"" on EOF or error), parking the caller until some come.

    Bytes the HTTP parser already buffered (sent right behind the upgrade request) come first.
    `wait_first` skips the first `recv` when the caller expects nothing to be there yet.
    """
    if conn.http.buffered:
        return conn.http.take_buffered()
    sock = conn.sock
    if wait_first and not (conn.scheme == "https" and sock.buffered):
        # PERF: a peer that has been answered usually waits for the answer before sending
        # more (request/response, ping-pong), so a recv now would be a wasted EAGAIN (and a
        # raised BlockingIOError); the read watcher is level-triggered, so waiting first
        # returns at once when bytes are in fact already there.
        conn.wait_readable()
    while True:
        try:
            data: bytes = sock.recv(READ_SIZE)
        except BlockingIOError:
            conn.wait_readable()
            continue
        except OSError:
            return b""
        if data:
            conn.turn.check()  # a peer whose bytes are always there must not hold the worker
        return data


def shutdown(conn: Connection, how: int = socket.SHUT_RDWR) -> None:
    """Shut the socket down so the reading greenlet wakes up with EOF; errors mean it is gone."""
    try:
        conn.sock.shutdown(how)
    except OSError:
        pass


def linger(conn: Connection, seconds: float) -> None:
    """Half-close and drain input for up to `seconds`, so our last frame is not reset."""
    shutdown(conn, socket.SHUT_WR)
    end = time.monotonic() + seconds
    with gevent.Timeout(seconds, False):
        while time.monotonic() < end and read_some(conn):
            pass


class Readers:
    """One epoll set of upgraded sockets, read by one dispatcher greenlet per loop turn."""

    __slots__ = (
        "_active",
        "_current",
        "_epoll",
        "_handlers",
        "_hub",
        "_parked",
        "_waiting",
        "_watcher",
    )

    def __init__(self, hub: Any) -> None:
        self._hub = hub
        # The worker is monkey-patched, which hides `select.epoll`; we only ever poll it
        # without a timeout, after libev said its fd is readable, so it never blocks.
        self._epoll = get_original("select", "epoll")()
        self._watcher = hub.loop.io(self._epoll.fileno(), 1)
        self._handlers: dict[int, Callable[[], None]] = {}
        # fd -> handler of connections whose handler blocked: out of the set meanwhile.
        self._parked: dict[int, Callable[[], None]] = {}
        self._active: Any = None  # the dispatcher greenlet that serves the set
        self._waiting = False  # the active dispatcher is parked in its own wait
        self._current = -1  # the fd whose handler the active dispatcher is running

    def watch(self, fd: int, handler: Callable[[], None]) -> None:
        """Call `handler()` in a dispatcher greenlet whenever `fd` is readable (or at EOF)."""
        self._handlers[fd] = handler
        self._parked.pop(fd, None)  # a stale entry of a closed socket with the same number
        try:
            self._epoll.register(fd, select.EPOLLIN)
        except FileExistsError:
            self._epoll.modify(fd, select.EPOLLIN)  # ditto, still in the kernel's set
        if not self._watcher.active:
            self._watcher.start(self._on_ready)

    def unwatch(self, fd: int) -> None:
        """Stop calling the handler of `fd`; call before the socket closes."""
        if self._handlers.pop(fd, None) is None:
            return
        if self._parked.pop(fd, None) is not None:
            return
        try:
            self._epoll.unregister(fd)
        except (OSError, ValueError):
            pass  # already closed: the kernel dropped it from the set

    def _on_ready(self) -> None:
        # Runs in the hub. PERF: a switch straight into the waiting dispatcher, no Waiter.
        if self._waiting:
            self._active.switch()
            return
        fd = self._current
        if fd >= 0:
            # The dispatcher is neither waiting nor running, so its handler blocked: park
            # that connection (only its own dispatcher reads it again) and hand over.
            self._park(fd)
        self._current = -1
        self._active = greenlet(self._serve, parent=self._hub)
        self._active.switch()

    def _park(self, fd: int) -> None:
        handler = self._handlers.get(fd)
        if handler is None:
            return  # the blocked handler unwatched its own connection
        try:
            self._epoll.unregister(fd)
        except (OSError, ValueError):
            return  # closed meanwhile
        self._parked[fd] = handler

    def _unpark(self, fd: int, handler: Callable[[], None]) -> None:
        # The handler must match: the fd may have been closed and reused meanwhile.
        if self._parked.get(fd) is not handler:
            return
        del self._parked[fd]
        try:
            self._epoll.register(fd, select.EPOLLIN)
        except OSError:
            self._handlers.pop(fd, None)  # closed while parked

    def _serve(self) -> None:
        me = getcurrent()
        poll = self._epoll.poll
        handlers = self._handlers
        hub = self._hub
        while True:
            for fd, _ in poll(0, BATCH):
                handler = handlers.get(fd)
                if handler is None:
                    continue  # unwatched by a handler earlier in this batch
                self._current = fd
                try:
                    handler()
                except Exception:
                    log.exception("upgraded connection handler failed")
                    self.unwatch(fd)
                if self._active is not me:
                    self._unpark(fd, handler)  # replaced while blocked: the new one goes on
                    return
            self._current = -1
            self._waiting = True
            try:
                hub.switch()
            finally:
                self._waiting = False


_readers: weakref.WeakKeyDictionary[Any, tuple[int, Readers]] = weakref.WeakKeyDictionary()


def readers() -> Readers:
    """The `Readers` of this thread's hub in this process (made on first use)."""
    hub = gevent.get_hub()
    pid = os.getpid()
    entry = _readers.get(hub)
    if entry is None or entry[0] != pid:  # a forked child must not share its parent's epoll
        entry = _readers[hub] = (pid, Readers(hub))
    return entry[1]
