"""Key/value stores: the `Store` protocol and `MemoryStore`, the in-process default.

Theory of operation. Features that keep small pieces of state between requests — rate-limit
buckets today, sessions and the shared cache later — talk to a `Store`, never to a dict, so
that the same code can keep its state in this process (`MemoryStore`), in every worker of one
machine (the cross-worker store of `workers.shared.state`) or on several machines (Redis) without a
change. The protocol is deliberately small and every operation is atomic on its own: a store
spread over processes must be able to run each one as a single message or script.

Contract for implementers:

- Keys are `str`, values are `bytes` (a store that crosses a process boundary must not depend
  on pickling Python objects). Callers encode their own values.
- `ttl` is in seconds (float); `None` means "no expiry". An expired key is absent for every
  operation, whether or not it has been swept yet.
- `compare_and_set()` writes only if the value is still the one the caller read, in one
  atomic step: what lets sessions write back only their own changes (`socketify.state.sessions`).
  Callers should treat a user's store without it as one offering plain `set` only.
- `take()` is a token bucket in one atomic step, so N workers sharing one store share one quota.
  A bucket that does not exist is full; a full bucket may be dropped (it is the same as none),
  so an implementation keeps a bucket at most `capacity / refill_per_second` seconds.
- `now` is a time on the caller's monotonic clock. Stores local to one machine may use it (so
  tests can drive time); a store shared across hosts should ignore it and use its own clock.
- Methods may block briefly (a network store); under gevent they must only block
  cooperatively.
- A store should be bounded: the built-in ones hold at most a capacity, evicting entries
  with a TTL (written longest ago first) and never one without; a write that finds no room
  raises an error.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from workers.shared.kvstore import DEFAULT_MAX_BYTES, KeyValueStore, StoreFull, TakeResult

__all__ = ["MemoryStore", "Store", "StoreFull", "TakeResult"]


@runtime_checkable
class Store(Protocol):
    """What rate limits, sessions and caches need from a key/value store (see module doc)."""

    def get(self, key: str) -> bytes | None:
        """Return the value of `key`, or None when absent or expired."""
        ...

    def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        """Store `value` under `key`, replacing it; `ttl` seconds until it expires."""
        ...

    def compare_and_set(
        self, key: str, expected: bytes | None, value: bytes, ttl: float | None = None
    ) -> bool:
        """Store `value` only if the current value equals `expected` (None: only if absent),
        atomically; return whether it wrote."""
        ...

    def delete(self, key: str) -> bool:
        """Remove `key`; True if it existed."""
        ...

    def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        """Add `amount` to the integer at `key` (absent counts as 0) and return the new value.

        `ttl` is applied only when the key is created, so a fixed window is easy to build.
        """
        ...

    def take(
        self, key: str, capacity: float, refill_per_second: float, now: float | None = None
    ) -> TakeResult:
        """Refill the token bucket `key`, then take one token if at least one is there."""
        ...


class MemoryStore:
    """A `Store` in this process's memory: fast, but private to one worker.

    The engine is the same `KeyValueStore` the master's cross-worker store runs, so the
    two cannot drift apart; this adds str keys, a type check and a lock for threaded users.
    It holds at most `max_bytes` (keys, values and about 300 bytes per entry), evicting
    entries with a TTL written longest ago first; `StoreFull` when only entries without a
    TTL are left.
    """

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self._engine = KeyValueStore(clock, max_bytes)
        # Cheap when uncontended, and keeps the store right for threaded (non-gevent) users.
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        """Return the value of `key`, or None when absent or expired."""
        with self._lock:
            return self._engine.get(key.encode())

    def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        """Store `value` under `key`, replacing it; `ttl` seconds until it expires."""
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError("store values are bytes; encode them first")
        with self._lock:
            self._engine.set(key.encode(), bytes(value), ttl)

    def compare_and_set(
        self, key: str, expected: bytes | None, value: bytes, ttl: float | None = None
    ) -> bool:
        """Store `value` only if the current value equals `expected` (None: only if absent)."""
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError("store values are bytes; encode them first")
        with self._lock:
            return self._engine.compare_and_set(key.encode(), expected, bytes(value), ttl)

    def delete(self, key: str) -> bool:
        """Remove `key`; True if it existed (and had not expired)."""
        with self._lock:
            return self._engine.delete(key.encode())

    def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        """Add `amount` to the integer at `key` and return it; `ttl` applies on creation."""
        with self._lock:
            return self._engine.incr(key.encode(), amount, ttl)

    def take(
        self, key: str, capacity: float, refill_per_second: float, now: float | None = None
    ) -> TakeResult:
        """Refill bucket `key` for the time elapsed, then take one token if one is there."""
        with self._lock:
            return self._engine.take(key.encode(), capacity, refill_per_second, now)

    def __len__(self) -> int:
        return len(self._engine)
