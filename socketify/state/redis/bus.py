"""`RedisBus`: publish/subscribe across hosts through Redis (`workers.shared.bus`'s interface).

    bus = RedisBus("redis://10.0.0.5:6379/0")       # or default_bus() with SOCKETIFY_STATE_URL
    bus.subscribe("room:lobby", deliver)            # on every host, every worker
    bus.publish("room:lobby", frame_bytes)

Theory of operation. The bus publishes on one Redis channel per bus channel (under `prefix`)
and listens with one pattern subscription per process. Redis delivers each message to every
subscribed process, the publisher's own included, so the publisher does not deliver locally:
each process sees each message exactly once, in each publisher's order. Messages published
while a process is disconnected are lost, as with any Redis pub/sub; so is a message published
while Redis is unreachable, or it arrives late if Redis was only paused (`publish` never raises
for an outage: a Hub broadcast from a WebSocket handler must not fail the handler). The
listener owns the subscription's connection: when it breaks, it reports the outage to the
server's breaker (`socketify.state.redis.client`), then connects and subscribes again once
a second until Redis is back, which ends the outage.

Under gevent (every worker) the listener is a thread, which monkey-patching makes a greenlet,
and its socket's timeouts fire. Requires the `redis` extra.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from socketify.core.errors import StateUnavailable
from socketify.state.redis.client import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_TIMEOUT,
    DEFAULT_URL,
    breaker_of,
    connect,
    glob_escape,
)

__all__ = ["RedisBus"]

log = logging.getLogger("socketify.state")


class RedisBus:
    """Publish/subscribe across hosts through Redis; the same interface as `workers.shared.bus`."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        prefix: str = "socketify:bus:",
        client: Any = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        self.url = url
        self.prefix = prefix
        self.redis = client if client is not None else connect(url, timeout, connect_timeout)
        self.breaker = breaker_of(self.redis)
        # How long subscribing waits for Redis to confirm: one connection and one reply.
        self._confirm_within = (connect_timeout or 0.0) + (timeout or DEFAULT_TIMEOUT)
        self.lost = 0  # messages published while Redis was unreachable
        self._subscribers: dict[str, list[Callable[[bytes], object]]] = {}
        self._listener: threading.Thread | None = None
        self._subscribed = threading.Event()  # set while the listener's subscription holds
        self._wake = threading.Event()  # ends the listener's wait before a reconnection
        self._closed = False

    def subscribe(self, channel: str, callback: Callable[[bytes], object]) -> _Subscription:
        """Call `callback(payload)` for every message published on `channel` by anyone."""
        self._subscribers[channel] = [*self._subscribers.get(channel, ()), callback]
        self._start()
        return _Subscription(self, channel, callback)

    def publish(self, channel: str, payload: bytes) -> None:
        """Send `payload` to every subscriber of `channel` on every host (this one included).

        While Redis is unreachable the message is lost (counted in `lost`), never raised.
        A publish that timed out against a paused Redis may still arrive once it resumes.
        """
        try:
            self.breaker.call(self.redis.publish, self.prefix + channel, bytes(payload))
        except StateUnavailable:
            self.lost += 1

    def subscribers(self, channel: str) -> int:
        """How many local callbacks listen on `channel`."""
        return len(self._subscribers.get(channel, ()))

    @property
    def listening(self) -> bool:
        """Whether this process's subscription to Redis holds right now."""
        return self._subscribed.is_set()

    def close(self) -> None:
        """Stop listening (the listener closes its connection within a second)."""
        # The listener owns the subscription: closing it from here would race its reads.
        self._closed = True
        self._wake.set()

    def _start(self) -> None:
        if self._listener is None:
            self._listener = threading.Thread(target=self._listen, name="redis-bus", daemon=True)
            self._listener.start()
        if not self._subscribed.is_set() and self.breaker.available:
            # A publish from another connection right after subscribe() returns must reach
            # us; while Redis is down there is nothing to wait for.
            self._subscribed.wait(self._confirm_within)

    def _listen(self) -> None:
        pattern = glob_escape(self.prefix) + "*"
        while not self._closed:
            pubsub = None
            try:
                pubsub = self._subscribe(pattern)
                self.breaker.succeeded()
                self._subscribed.set()
                self._receive(pubsub)
            except Exception as exc:
                if self._closed:
                    return
                if isinstance(exc, self.breaker.outage_errors):
                    self.breaker.failed(exc)
                else:
                    log.exception("the Redis bus listener failed; it subscribes again")
            finally:
                self._subscribed.clear()
                if pubsub is not None:
                    _close_quietly(pubsub)
            self._wake.wait(self.breaker.cooldown)

    def _subscribe(self, pattern: str) -> Any:
        from redis.exceptions import TimeoutError as RedisTimeout

        pubsub = self.redis.pubsub()
        try:
            pubsub.psubscribe(pattern)
            deadline = time.monotonic() + self._confirm_within
            while (left := deadline - time.monotonic()) > 0:
                message = pubsub.get_message(timeout=left)
                if message is not None and message.get("type") == "psubscribe":
                    return pubsub
            raise RedisTimeout("Redis did not confirm the bus subscription")
        except BaseException:
            _close_quietly(pubsub)
            raise

    def _receive(self, pubsub: Any) -> None:
        skip = len(self.prefix)
        while not self._closed:
            message = pubsub.get_message(timeout=1.0)
            if message is None or message.get("type") != "pmessage":
                continue
            channel = message["channel"][skip:].decode()
            for callback in self._subscribers.get(channel, ()):
                try:
                    callback(message["data"])
                except Exception:
                    log.exception("bus subscriber %r of %r failed", callback, channel)

    def remove(self, channel: str, callback: Callable[[bytes], object]) -> None:
        """Stop calling `callback` for `channel` (what a subscription's `cancel` does)."""
        callbacks = [c for c in self._subscribers.get(channel, ()) if c is not callback]
        if callbacks:
            self._subscribers[channel] = callbacks
        else:
            self._subscribers.pop(channel, None)


def _close_quietly(pubsub: Any) -> None:
    try:
        pubsub.close()
    except Exception as exc:  # a connection already broken: nothing left to release
        log.debug("closing a Redis subscription failed: %s", exc)


class _Subscription:
    __slots__ = ("_bus", "_callback", "_channel")

    def __init__(self, bus: RedisBus, channel: str, callback: Callable[[bytes], object]) -> None:
        self._bus = bus
        self._channel = channel
        self._callback = callback

    def cancel(self) -> None:
        """Stop delivering to this callback."""
        self._bus.remove(self._channel, self._callback)
