"""What a worker's target is given: its sockets, the stop request, and progress reporting."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workers.supervise.heartbeat import HeartbeatTable

__all__ = ["WorkerContext"]

log = logging.getLogger("socketify.worker")


class WorkerContext:
    """The worker's view of its life: serve ``sockets``, call ``ready()``, stop when asked.

    All methods are meant to be called from greenlets of the worker's hub; none blocks the hub.
    """

    def __init__(
        self,
        *,
        worker_id: int,
        generation: int,
        sockets: list[socket.socket],
        graceful_timeout: float,
        max_requests: int = 0,
        table: HeartbeatTable | None = None,
        record: int = -1,
        notify_fd: int = -1,
    ) -> None:
        # Imported here, not at module level: the master imports this module (through
        # workers.supervise.worker) and must never load gevent; contexts are only built in workers.
        from gevent.event import Event

        self.worker_id = worker_id
        self.generation = generation
        self.sockets = sockets
        self.graceful_timeout = graceful_timeout
        self.max_requests = max_requests
        self._table = table
        self._record = record
        self._notify_fd = notify_fd
        self._stop_event = Event()
        self._graceful = True
        self._on_stop: list[Callable[[], object]] = []
        self._ready = False
        self._served = 0
        self._retire_asked = False

    @property
    def record(self) -> int:
        """This worker's index in the master's shared tables (heartbeats, tallies); -1 if none."""
        return self._record

    @property
    def stopping(self) -> bool:
        """Whether a stop has been requested (stop accepting, finish what is in flight)."""
        return self._stop_event.is_set()

    @property
    def graceful(self) -> bool:
        """Whether the requested stop is graceful (drain) rather than immediate (drop)."""
        return self._graceful

    @property
    def is_ready(self) -> bool:
        """Whether ``ready()`` has been called."""
        return self._ready

    @property
    def requests_served(self) -> int:
        """How many times ``request_done()`` was called."""
        return self._served

    def ready(self) -> None:
        """Tell the master this worker accepts connections (call once the listeners run)."""
        if self._ready:
            return
        self._ready = True
        if self._table is not None:
            # Beat first: the heartbeat greenlet has not run while the app was imported, and
            # the master must not judge a worker that is already accepting as silent.
            self._table.beat(self._record)
            self._table.mark_ready(self._record)
        self._notify_master()

    def request_done(self) -> None:
        """Count one served request; past ``max_requests`` ask the master for a replacement.

        The worker keeps serving until the replacement is ready, then the master stops it
        gracefully (SIGTERM), so recycling never leaves the slot without an acceptor.
        """
        self._served += 1
        if self._table is None:
            return
        # PERF: the shared count feeds status lines only; every 32nd request (and each
        # heartbeat, see `publish_requests`) keeps it fresh without a write per request.
        if not self._served & 31:
            self._table.set_requests(self._record, self._served)
        if self.max_requests and self._served >= self.max_requests and not self._retire_asked:
            self._retire_asked = True
            log.info(
                "worker %d served %d requests; asking to be recycled", self.worker_id, self._served
            )
            self._table.request_retire(self._record)
            self._notify_master()

    def publish_requests(self) -> None:
        """Write the exact request count to the shared table (called with each heartbeat)."""
        if self._table is not None:
            self._table.set_requests(self._record, self._served)

    def wait_stop(self, timeout: float | None = None) -> bool:
        """Wait cooperatively until a stop is requested; False if ``timeout`` passed first."""
        return bool(self._stop_event.wait(timeout))

    def on_stop(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` as soon as a stop is requested (at once if it already was).

        Servers use it to close their listeners immediately, before draining.
        """
        if self.stopping:
            self._run(callback)
        else:
            self._on_stop.append(callback)

    def request_stop(self, graceful: bool = True) -> bool:
        """Ask this worker to stop, as SIGTERM (graceful) or SIGQUIT (immediate) do.

        Returns False when nothing changed (already stopping, not more urgently).
        """
        if self.stopping:
            if graceful or not self._graceful:
                return False
            self._graceful = False  # an immediate stop overrides a graceful one in progress
            return True
        self._graceful = graceful
        callbacks, self._on_stop = self._on_stop, []
        for callback in callbacks:
            self._run(callback)
        self._stop_event.set()
        return True

    def _run(self, callback: Callable[[], object]) -> None:
        try:
            callback()
        except Exception:
            log.exception("on_stop callback %r failed", callback)

    def _notify_master(self) -> None:
        # One byte on the master's wake-up pipe: it re-reads the heartbeat table at once.
        # The pipe is non-blocking; if it is full the master is awake anyway.
        if self._notify_fd >= 0:
            with contextlib.suppress(OSError):
                os.write(self._notify_fd, b"w")
