"""Publish/subscribe across the workers of one master: ``workers.shared.bus.bus()``.

    bus = workers.shared.bus.bus()                      # None outside a pre-forked worker
    bus.subscribe("room:lobby", lambda data: deliver_to_local_members(data))
    bus.publish("room:lobby", frame_bytes)       # every worker's callbacks get frame_bytes

Theory of operation. ``publish`` hands the subscribers of this worker the payload at once
(in the publishing greenlet) and puts one record on the worker's up ring; the master's state
server copies that record to every other worker's down ring (``workers.shared.state_server``) and
each worker's reader greenlet calls its local subscribers. So a publish reaches every worker
exactly once — the local one included — and the messages of one publisher arrive everywhere
in the order they were published. A worker forked later (a respawn after ``kill -9``, a
reload, SIGTTIN) is on the bus from its first instant; it does not see older messages.

The master relays every message to every worker; channels are filtered in the receiving
worker, which is cheap next to a syscall and keeps the master free of per-worker interest
lists. Callbacks run in the reader greenlet (or the publisher's): they must not block for
long, and an exception in one is logged and does not stop the others. ``LocalBus`` is the
same interface inside one process (``workers=0``, tests).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from workers.shared import wire
from workers.shared.link import Link, StateError

__all__ = ["Bus", "LocalBus", "Subscription", "bus", "install"]

log = logging.getLogger("socketify.bus")

Callback = Callable[[bytes], object]

_bus: Bus | None = None


def bus() -> Bus | None:
    """This worker's bus; None outside a pre-forked worker."""
    return _bus


def install(link: Link | None) -> Bus | None:
    """Set (or with None, clear) this process's bus; done by the worker at boot."""
    global _bus
    _bus = Bus(link) if link is not None else None
    return _bus


class Subscription:
    """A registered callback; ``cancel()`` stops its deliveries."""

    __slots__ = ("_callback", "_channel", "_owner")

    def __init__(self, owner: LocalBus, channel: str, callback: Callback) -> None:
        self._owner = owner
        self._channel = channel
        self._callback = callback

    def cancel(self) -> None:
        """Stop delivering to this callback (idempotent)."""
        self._owner.unsubscribe(self._channel, self._callback)


class LocalBus:
    """Publish/subscribe inside this process: the delivery half of every bus."""

    def __init__(self) -> None:
        self._subscribers: dict[str, list[Callback]] = {}

    def subscribe(self, channel: str, callback: Callback) -> Subscription:
        """Call ``callback(payload)`` for every message published on ``channel``."""
        # Copy-on-write: a callback may (un)subscribe while a delivery iterates the list.
        self._subscribers[channel] = [*self._subscribers.get(channel, ()), callback]
        return Subscription(self, channel, callback)

    def publish(self, channel: str, payload: bytes) -> None:
        """Deliver ``payload`` to this process's subscribers of ``channel``."""
        self._deliver(channel, payload)

    def subscribers(self, channel: str) -> int:
        """How many local callbacks listen on ``channel``."""
        return len(self._subscribers.get(channel, ()))

    def _deliver(self, channel: str, payload: bytes) -> None:
        for callback in self._subscribers.get(channel, ()):
            try:
                callback(payload)
            except Exception:
                log.exception("bus subscriber %r of %r failed", callback, channel)

    def unsubscribe(self, channel: str, callback: Callback) -> None:
        """Stop delivering `channel`'s messages to `callback` (nothing if it was not there)."""
        callbacks = [c for c in self._subscribers.get(channel, ()) if c is not callback]
        if callbacks:
            self._subscribers[channel] = callbacks
        else:
            self._subscribers.pop(channel, None)


class Bus(LocalBus):
    """The cross-worker bus of one master, over this worker's ``Link``."""

    def __init__(self, link: Link) -> None:
        super().__init__()
        self._link = link
        link.on_publish = self._on_record
        # The record carries a 3-byte header and the channel name besides the payload.
        self.max_payload = link.max_record - 3 - 1024

    def publish(self, channel: str, payload: bytes) -> None:
        """Deliver ``payload`` to the subscribers of ``channel`` in every worker, once each."""
        if len(payload) > self.max_payload:
            raise StateError(
                f"a bus message of {len(payload)} bytes exceeds the limit of "
                f"{self.max_payload} bytes"
            )
        name = channel.encode()
        if len(name) > 1024:
            raise ValueError("bus channel names are at most 1024 bytes")
        self._deliver(channel, payload)
        self._link.send(wire.encode_publish(name, payload))

    def _on_record(self, record: bytes) -> None:
        name, payload = wire.decode_publish(record)
        channel = name.decode()
        if channel in self._subscribers:
            self._deliver(channel, payload)
