"""Key/value stores: the `Store` protocol and `MemoryStore`, the in-process default.

Theory of operation. Features that keep small pieces of state between requests — rate-limit
buckets today, sessions and the shared cache later — talk to a `Store`, never to a dict, so
that the same code can keep its state in this process (`MemoryStore`), in every worker of one
machine (the cross-worker store of `workers.state`) or on several machines (Redis) without a
change. The protocol is deliberately small and every operation is atomic on its own: a store
spread over processes must be able to run each one as a single message or script.

Contract for implementers:

- Keys are `str`, values are `bytes` (a store that crosses a process boundary must not depend
  on pickling Python objects). Callers encode their own values.
- `ttl` is in seconds (float); `None` means "no expiry". An expired key is absent for every
  operation, whether or not it has been swept yet.
- `take()` is a token bucket in one atomic step, so N workers sharing one store share one quota.
  A bucket that does not exist is full; a full bucket may be dropped (it is the same as none),
  so an implementation keeps a bucket at most `capacity / refill_per_second` seconds.
- `now` is a time on the caller's monotonic clock. Stores local to one machine may use it (so
  tests can drive time); a store shared across hosts should ignore it and use its own clock.
- Methods may block briefly (a network store); under gevent they must only block
  cooperatively.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import NamedTuple, Protocol, runtime_checkable

__all__ = ["MemoryStore", "Store", "TakeResult"]

_SWEEP_EVERY = 60.0  # seconds between sweeps of expired keys in MemoryStore


class TakeResult(NamedTuple):
    """The outcome of `Store.take`: one token taken or not, and the bucket afterwards."""

    allowed: bool  # True when a token was taken
    remaining: float  # tokens left after this call (fractional; callers usually floor it)
    reset_seconds: float  # seconds until a token is available again (0.0 if one is; inf if never)


@runtime_checkable
class Store(Protocol):
    """What rate limits, sessions and caches need from a key/value store (see module doc)."""

    def get(self, key: str) -> bytes | None:
        """Return the value of `key`, or None when absent or expired."""
        ...

    def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        """Store `value` under `key`, replacing it; `ttl` seconds until it expires."""
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


class _Bucket:
    __slots__ = ("full_at", "stamp", "tokens")

    def __init__(self, tokens: float, stamp: float) -> None:
        self.tokens = tokens
        self.stamp = stamp
        self.full_at = stamp  # when the bucket will have refilled completely


class MemoryStore:
    """A `Store` in this process's memory: fast, but private to one worker."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._values: dict[str, tuple[bytes | int, float]] = {}  # key -> (value, expires_at)
        self._buckets: dict[str, _Bucket] = {}
        # Cheap when uncontended, and keeps the store right for threaded (non-gevent) users.
        self._lock = threading.Lock()
        self._next_sweep = self._clock() + _SWEEP_EVERY

    # -- plain values -----------------------------------------------------------------------

    def get(self, key: str) -> bytes | None:
        """Return the value of `key`, or None when absent or expired."""
        with self._lock:
            value = self._live(key, self._clock())
        if value is None:
            return None
        return value if isinstance(value, bytes) else str(value).encode()

    def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        """Store `value` under `key`, replacing it; `ttl` seconds until it expires."""
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError("store values are bytes; encode them first")
        now = self._clock()
        with self._lock:
            self._values[key] = (bytes(value), _expiry(now, ttl))
            self._maybe_sweep(now)

    def delete(self, key: str) -> bool:
        """Remove `key`; True if it existed (and had not expired)."""
        now = self._clock()
        with self._lock:
            existed = self._live(key, now) is not None
            self._values.pop(key, None)
            return existed

    def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        """Add `amount` to the integer at `key` and return it; `ttl` applies on creation."""
        now = self._clock()
        with self._lock:
            current = self._live(key, now)
            if current is None:
                value, expires = amount, _expiry(now, ttl)
            else:
                value = _as_int(current) + amount
                expires = self._values[key][1]
            self._values[key] = (value, expires)
            self._maybe_sweep(now)
            return value

    # -- token buckets ----------------------------------------------------------------------

    def take(
        self, key: str, capacity: float, refill_per_second: float, now: float | None = None
    ) -> TakeResult:
        """Refill bucket `key` for the time elapsed, then take one token if one is there."""
        if now is None:
            now = self._clock()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = _Bucket(float(capacity), now)
            elif now > bucket.stamp:
                bucket.tokens = min(
                    float(capacity), bucket.tokens + (now - bucket.stamp) * refill_per_second
                )
                bucket.stamp = now
            allowed = bucket.tokens >= 1.0
            if allowed:
                bucket.tokens -= 1.0
            tokens = bucket.tokens
            missing = float(capacity) - tokens
            if missing <= 0:
                bucket.full_at = now
            elif refill_per_second > 0:
                bucket.full_at = now + missing / refill_per_second
            else:
                bucket.full_at = math.inf  # never refills: the quota is for good
            self._maybe_sweep(now)
        if tokens >= 1.0:
            wait = 0.0
        elif refill_per_second > 0:
            wait = (1.0 - tokens) / refill_per_second
        else:
            wait = math.inf
        return TakeResult(allowed, tokens, wait)

    # -- housekeeping -----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._values) + len(self._buckets)

    def _live(self, key: str, now: float) -> bytes | int | None:
        entry = self._values.get(key)
        if entry is None:
            return None
        if entry[1] <= now:
            del self._values[key]
            return None
        return entry[0]

    def _maybe_sweep(self, now: float) -> None:
        # Amortised: one pass a minute keeps abandoned keys from growing without bound.
        if now < self._next_sweep:
            return
        self._next_sweep = now + _SWEEP_EVERY
        expired = [k for k, (_, expires) in self._values.items() if expires <= now]
        for key in expired:
            del self._values[key]
        # A bucket that has refilled completely is the same as no bucket.
        full = [k for k, bucket in self._buckets.items() if bucket.full_at <= now]
        for key in full:
            del self._buckets[key]


def _expiry(now: float, ttl: float | None) -> float:
    if ttl is None:
        return math.inf
    if ttl <= 0:
        raise ValueError("ttl must be positive (or None for no expiry)")
    return now + ttl


def _as_int(value: bytes | int) -> int:
    if isinstance(value, int):
        return value
    try:
        return int(value)
    except ValueError:
        raise ValueError("incr on a value that is not an integer") from None
