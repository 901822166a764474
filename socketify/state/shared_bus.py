"""`default_bus()`: the publish/subscribe bus that reaches every worker (and, with Redis, host).

    bus = default_bus()
    bus.subscribe("room:lobby", deliver_locally)   # callback(payload: bytes)
    bus.publish("room:lobby", frame)               # every subscriber everywhere, once each

Like `SharedStore`, the choice is made in each process on first use: `SOCKETIFY_STATE_URL` (or
`url=`) gives a `socketify.state.redis.RedisBus`; a worker of the pre-fork master gets
`workers.shared.bus.bus()`; anything else (`workers=0`, tests) a `workers.shared.bus.LocalBus`
private to the process. All three deliver a message to each subscribing process exactly once, the
publisher's included, in each publisher's order. A message published while Redis is unreachable is
lost, never raised, and the Redis bus subscribes again by itself once Redis is back
(`socketify.state.redis.bus`).
"""

from __future__ import annotations

import os
from typing import Any

from socketify.state.shared_store import STATE_URL_ENV

__all__ = ["default_bus"]

_buses: dict[str | None, Any] = {}
_pid = -1


def default_bus(url: str | None = None) -> Any:
    """This process's bus (see the module docstring); the same object on every call."""
    global _pid
    if _pid != os.getpid():  # a forked child re-resolves: its parent's bus is not its own
        _buses.clear()
        _pid = os.getpid()
    url = url or os.environ.get(STATE_URL_ENV) or None
    bus = _buses.get(url)
    if bus is None:
        if url:
            from socketify.state.redis.bus import RedisBus

            bus = RedisBus(url)
        else:
            from workers.shared.bus import LocalBus
            from workers.shared.bus import bus as worker_bus

            bus = worker_bus() or LocalBus()
        _buses[url] = bus
    return bus
