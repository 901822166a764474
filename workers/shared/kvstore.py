"""The key/value engine behind the cross-worker store: values with TTLs, counters, buckets.

One thread owns an instance (the master's state server, or a single process without a
master), so nothing here locks: each method is one atomic step because nobody else can run
in between. Time is ``time.monotonic()`` unless the caller passes ``now`` (tests drive it);
on one machine every process reads the same monotonic clock.

Expired keys are absent for every operation at once and removed lazily when touched, plus
one sweep per ``SWEEP_EVERY`` seconds so abandoned keys (sessions nobody comes back for)
do not grow the master without bound. A token bucket that has refilled completely is the
same as no bucket, so the sweep drops those too.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["KeyValueStore", "TakeResult", "take_result"]

SWEEP_EVERY = 30.0


class TakeResult(NamedTuple):
    """The outcome of a token-bucket ``take``: one token taken or not, and the bucket after.

    Every store's ``take`` answers one (``socketify.state.stores`` re-exports it for the
    ``Store`` protocol).
    """

    allowed: bool  # True when a token was taken
    remaining: float  # tokens left after this call (fractional; callers usually floor it)
    reset_seconds: float  # seconds until a token is available again (0.0 if one is; inf if never)


# PERF: ``take_result(TakeResult, (allowed, remaining, reset))`` builds one in a single C
# call; the NamedTuple's own ``__new__`` is Python code.
take_result: Any = tuple.__new__


class KeyValueStore:
    """Bytes and integers under string-like byte keys, with expiry, incr and token buckets."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._values: dict[bytes, tuple[bytes | int, float]] = {}  # key -> (value, expires_at)
        # key -> [tokens, stamp, full_at]; a list, mutated in place on the hot path.
        self._buckets: dict[bytes, list[float]] = {}
        self._next_sweep = clock() + SWEEP_EVERY

    def now(self) -> float:
        """The engine's clock."""
        return self._clock()

    # -- values -----------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        """The live value of ``key`` (an integer as its decimal text), or None."""
        value = self._live(key, self._clock())
        if value is None or isinstance(value, bytes):
            return value
        return str(value).encode()

    def set(self, key: bytes, value: bytes, ttl: float | None = None) -> None:
        """Store ``value``, replacing any; expires ``ttl`` seconds from now (None: never)."""
        now = self._clock()
        self._values[key] = (value, _expiry(now, ttl))
        self._maybe_sweep(now)

    def delete(self, key: bytes) -> bool:
        """Remove ``key``; True when a live value was there."""
        existed = self._live(key, self._clock()) is not None
        self._values.pop(key, None)
        return existed

    def incr(self, key: bytes, amount: int = 1, ttl: float | None = None) -> int:
        """Add ``amount`` (absent counts as 0) and return the result; ``ttl`` only on creation."""
        now = self._clock()
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
        self, key: bytes, capacity: float, refill_per_second: float, now: float | None = None
    ) -> TakeResult:
        """Refill bucket ``key`` for the time elapsed, then take one token if one is there.

        Returns ``(allowed, tokens left, seconds until a token is available)``; a new bucket
        starts full; with no refill the wait is ``inf``.
        """
        if now is None:
            now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = [float(capacity), now, now]
        elif now > bucket[1]:
            bucket[0] = min(float(capacity), bucket[0] + (now - bucket[1]) * refill_per_second)
            bucket[1] = now
        tokens = bucket[0]
        allowed = tokens >= 1.0
        if allowed:
            tokens -= 1.0
            bucket[0] = tokens
        missing = capacity - tokens
        if missing <= 0:
            bucket[2] = now
        else:
            bucket[2] = now + missing / refill_per_second if refill_per_second > 0 else math.inf
        self._maybe_sweep(now)
        if tokens >= 1.0:
            wait = 0.0
        elif refill_per_second > 0:
            wait = (1.0 - tokens) / refill_per_second
        else:
            wait = math.inf
        result: TakeResult = take_result(TakeResult, (allowed, tokens, wait))
        return result

    # -- prefixes (cache clear and size) ----------------------------------------------------

    def clear_prefix(self, prefix: bytes) -> int:
        """Remove every value and bucket whose key starts with ``prefix``; how many values."""
        doomed = [key for key in self._values if key.startswith(prefix)]
        now = self._clock()
        live = sum(1 for key in doomed if self._values[key][1] > now)
        for key in doomed:
            del self._values[key]
        for key in [key for key in self._buckets if key.startswith(prefix)]:
            del self._buckets[key]
        return live

    def count_prefix(self, prefix: bytes) -> int:
        """How many live values have a key starting with ``prefix`` (expired ones are purged)."""
        now = self._clock()
        count = 0
        expired = []
        for key, (_, expires) in self._values.items():
            if key.startswith(prefix):
                if expires > now:
                    count += 1
                else:
                    expired.append(key)
        for key in expired:
            del self._values[key]
        return count

    def __len__(self) -> int:
        return len(self._values) + len(self._buckets)

    # -- housekeeping -----------------------------------------------------------------------

    def _live(self, key: bytes, now: float) -> bytes | int | None:
        entry = self._values.get(key)
        if entry is None:
            return None
        if entry[1] <= now:
            del self._values[key]
            return None
        return entry[0]

    def _maybe_sweep(self, now: float) -> None:
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_EVERY
        for key in [k for k, (_, expires) in self._values.items() if expires <= now]:
            del self._values[key]
        for key in [k for k, bucket in self._buckets.items() if bucket[2] <= now]:
            del self._buckets[key]


def _expiry(now: float, ttl: float | None) -> float:
    if ttl is None:
        return math.inf
    if not ttl > 0:
        raise ValueError("ttl must be positive seconds (or None for no expiry)")
    return now + ttl


def _as_int(value: bytes | int) -> int:
    if isinstance(value, int):
        return value
    try:
        return int(value)
    except ValueError:
        raise ValueError("incr on a value that is not an integer") from None
