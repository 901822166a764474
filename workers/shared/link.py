"""A worker's end of its rings to the master: requests with answers, and bus traffic.

Theory of operation
-------------------
``Link`` writes records to the *up* ring and reads the *down* ring from a libev io watcher
on the ring's eventfd, whose callback runs in the hub. There, answers are handed straight to
the greenlets parked in ``request()`` (a gevent ``Waiter`` per request id; many may be in
flight, and the master answers each exactly once), without a greenlet switch of their own.
Relayed publish records are queued for one dispatcher greenlet, because bus callbacks may
block (a WebSocket send) and the hub must never block.

``post()`` sends a request that needs no answer (a ``set``): the caller does not wait a round
trip, yet a worker that reads the key afterwards, because of something this one did after
posting, still sees the value: the master finishes every posted write it can see before it
answers any request (``workers.shared.state_server``).

Nothing here blocks the hub: a full up ring is retried after a short cooperative sleep. A
repeating timer looks at the ring every ``Ring.WAIT_BOUND`` in case a wake-up was lost (see
``workers.shared.shm``) and fails requests older than ``timeout`` with ``StateUnavailable`` (the
master's state server is gone or wedged), so a handler never hangs on it.

gevent is imported inside functions: the master imports ``workers.supervise.worker``, which
names this module.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from workers.shared import wire
from workers.shared.shm import Ring, RingFull
from workers.shared.state_server import Endpoint

__all__ = ["Link", "StateError", "StateUnavailable"]

log = logging.getLogger("socketify.state")

REQUEST_TIMEOUT = 5.0  # seconds before a request without an answer fails
FULL_RETRY = 0.0005  # seconds between attempts while the up ring is full


class StateError(Exception):
    """The cross-worker store refused an operation (the message says why)."""


class StateUnavailable(StateError):
    """The master's state server did not answer in time."""


class Link:
    """The worker side of an ``Endpoint`` (call from greenlets of this worker's hub)."""

    def __init__(
        self,
        endpoint: Endpoint,
        on_publish: Callable[[bytes], None] | None = None,
        timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        import gevent
        from gevent.event import Event

        self._up: Ring = endpoint.up
        self._down: Ring = endpoint.down
        self.table = endpoint.table
        if self.table is not None:
            self.table.pause = gevent.sleep  # a lock waiter lets this worker's greenlets run
        self.on_publish = on_publish
        self.timeout = timeout
        self._next_id = 0
        self._waiting: dict[int, tuple[Any, float]] = {}  # id -> (Waiter, deadline)
        self._inbox: deque[bytes] = deque()
        self._inbox_ready = Event()
        loop = gevent.get_hub().loop
        self._watcher = loop.io(self._down.notify_fd, 1)
        self._watcher.start(self._on_readable)
        self._timer = loop.timer(Ring.WAIT_BOUND, Ring.WAIT_BOUND)
        self._timer.start(self._on_timer)
        self._dispatcher = gevent.spawn(self._dispatch_publishes)
        self._down.prepare_wait()

    @property
    def max_record(self) -> int:
        """The largest record the rings carry."""
        return self._up.max_record

    # -- sending -----------------------------------------------------------------------------

    def request(self, op: wire.Op, key: bytes, args: bytes = b"") -> tuple[int, bytes]:
        """Send one store request and wait cooperatively for ``(status, body)``."""
        from gevent.hub import Waiter

        request_id = self._next_id = (self._next_id % 0xFFFFFFFF) + 1  # 0 means "no answer"
        waiter = Waiter()
        self._waiting[request_id] = (waiter, time.monotonic() + self.timeout)
        try:
            self.send(wire.encode_request(request_id, op, key, args))
            status, body = waiter.get()
        finally:
            self._waiting.pop(request_id, None)
        if status == wire.Status.ERROR:
            raise StateError(body.decode(errors="replace"))
        return status, body

    def post(self, op: wire.Op, key: bytes, args: bytes = b"") -> None:
        """Send one store request whose answer nobody needs (id 0: the master sends none)."""
        self.send(wire.encode_request(0, op, key, args))

    def send(self, record: bytes) -> None:
        """Put one record on the up ring, waiting cooperatively while it is full."""
        up = self._up
        while True:
            try:
                up.try_put(record)
                return
            except RingFull:
                import gevent

                gevent.sleep(FULL_RETRY)

    # -- receiving (hub callbacks) -----------------------------------------------------------

    def _on_readable(self) -> None:
        down = self._down
        down.clear_notification()
        while True:
            for record in down.drain(512):
                kind = record[0]
                if kind == wire.ANSWER:
                    request_id, status, body = wire.decode_answer(record)
                    entry = self._waiting.pop(request_id, None)
                    if entry is not None:
                        entry[0].switch((status, body))
                elif kind == wire.PUBLISH:
                    self._inbox.append(record)
                    self._inbox_ready.set()
                else:
                    log.error("unknown record kind %r from the master", kind)
            if down.prepare_wait():
                return

    def _on_timer(self) -> None:
        if not self._down.empty():
            self._on_readable()  # a lost wake-up: late by at most WAIT_BOUND
        if self._waiting:
            now = time.monotonic()
            late = [rid for rid, (_, deadline) in self._waiting.items() if deadline <= now]
            for request_id in late:
                waiter, _ = self._waiting.pop(request_id)
                message = f"the master's state server did not answer within {self.timeout:g} s"
                waiter.throw(StateUnavailable(message))

    def _dispatch_publishes(self) -> None:
        inbox = self._inbox
        ready = self._inbox_ready
        while True:
            ready.wait()
            ready.clear()
            while inbox:
                record = inbox.popleft()
                if self.on_publish is not None:
                    try:
                        self.on_publish(record)
                    except Exception:
                        log.exception("failed to deliver a bus message")

    def close(self) -> None:
        """Stop listening (the rings stay mapped until the process exits)."""
        self._watcher.stop()
        self._timer.stop()
        self._dispatcher.kill(block=False)
