"""Taking turns: no connection keeps the worker's event loop from polling its sockets.

Theory of operation. gevent never preempts a greenlet. One that always finds input waiting
(a client pipelining requests, or pouring in frames faster than they are handled) keeps the
worker to itself until it has to wait. `gevent.sleep(0)` is no way out: it only queues the
greenlet behind the loop's callbacks, and the loop runs callbacks (fifty before it even
looks at the clock) without polling the sockets, so the flooding greenlet is back at once
while new connections, the other clients' input and the timers (the worker's heartbeat)
wait; the loop's `iteration` does not move across a `sleep(0)`.

A greenlet serving input that came without waiting calls `Turn.check()` between pieces of
work (an answered request, a read). When the loop has not polled for `TURN_SECONDS` while
that greenlet ran, it passes its turn (`pass_turn`): it parks on a timer that is already
due, so libev polls the sockets without blocking and runs every watcher that became ready
(the other connections, the acceptor, the heartbeat) before the timer brings it back. Work
between two checks is bounded by the caller: one request, or one read of at most 64 KiB.
"""

from __future__ import annotations

import time
from typing import Any

from gevent import get_hub

__all__ = ["TURN_SECONDS", "Turn", "pass_turn"]

# How long one greenlet may run while the loop polls nothing. A fresh connection needs two or
# three loop iterations (accept, first read, answer), so it waits at most a few turns.
TURN_SECONDS = 0.005
_monotonic = time.monotonic


def pass_turn() -> None:
    """Let every greenlet whose socket or timer is ready run once, then go on."""
    hub = get_hub()
    hub.wait(hub.loop.timer(0.0))


class Turn:
    """One connection's share of its worker: how long it has run since the loop last polled."""

    __slots__ = ("_iteration", "_loop", "_started")

    def __init__(self, loop: Any = None) -> None:
        self._loop = loop if loop is not None else get_hub().loop
        self._iteration = -1  # the loop iteration this turn began in
        self._started = 0.0

    def check(self) -> None:
        """Pass the turn if this greenlet has run `TURN_SECONDS` since the loop last polled."""
        iteration = self._loop.iteration
        if iteration != self._iteration:
            # The loop polled since the last check: whatever waited meanwhile had its chance.
            self._iteration = iteration
            self._started = _monotonic()
        elif _monotonic() - self._started >= TURN_SECONDS:
            pass_turn()
            self._iteration = self._loop.iteration
            self._started = _monotonic()
