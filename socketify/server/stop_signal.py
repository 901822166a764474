"""`StopSignal`: the moment a service begins a graceful stop, for whoever must react to it.

Theory of operation. Connections that outlive a request (Pulse channels, event streams, TCP
handlers) would otherwise keep a stopping worker alive until `graceful_timeout` cuts them:
nothing on them ever finishes by itself. Each one subscribes a callback while it is served
and unsubscribes when it ends; the service sets the signal when its stop begins, and every
callback then runs in a greenlet of its own (a callback may send a last message, or wait for
a close handshake, without holding up the others or the stop itself). A subscription made
after the signal was set runs at once, so a handler that upgrades while the stop is already
under way is told too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import gevent
from gevent.event import Event

__all__ = ["StopSignal"]

log = logging.getLogger("socketify.error")

Callback = Callable[[], object]


class StopSignal:
    """Set once when a graceful stop begins; subscribers hear it in greenlets of their own."""

    __slots__ = ("_callbacks", "_event")

    def __init__(self) -> None:
        self._event = Event()
        # Keyed by a token per subscription, so an unsubscriber removes exactly its own.
        self._callbacks: dict[object, Callback] = {}

    @property
    def is_set(self) -> bool:
        """True once the stop has begun."""
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Park the caller until the stop begins (or `timeout`); True if it has."""
        return bool(self._event.wait(timeout))

    def subscribe(self, callback: Callback) -> Callable[[], None]:
        """Run `callback()` when the stop begins (now, if it has); returns the unsubscriber."""
        if self._event.is_set():
            gevent.spawn(_run, callback)
            return _nothing
        token = object()
        self._callbacks[token] = callback
        return lambda: self._callbacks.pop(token, None) and None

    def set(self) -> None:
        """Begin the stop: every subscriber's callback starts (once)."""
        if self._event.is_set():
            return
        self._event.set()
        callbacks = list(self._callbacks.values())
        self._callbacks.clear()
        for callback in callbacks:
            gevent.spawn(_run, callback)


def _run(callback: Callback) -> None:
    try:
        callback()
    except Exception:
        log.exception("a stop callback failed")


def _nothing() -> None:
    """The unsubscriber of a callback that already ran."""
