"""The key/value engine behind the cross-worker store: values with TTLs, counters, buckets.

One thread owns an instance (the master's state server, or a single process without a
master), so nothing here locks: each method is one atomic step because nobody else can run
in between. Time is ``time.monotonic()`` unless the caller passes ``now`` (tests drive it);
on one machine every process reads the same monotonic clock.

Expired keys are absent for every operation at once and removed lazily when touched, plus
one sweep per ``SWEEP_EVERY`` seconds so abandoned keys (sessions nobody comes back for)
are dropped. A token bucket that has refilled completely is the same as no bucket, so the
sweep drops those too.

Capacity. The engine holds at most ``max_bytes``, counting each entry as its key, its value
and ``ENTRY_OVERHEAD`` (about what CPython spends on an entry's objects). A write that would
go past it first evicts the entries with an expiry written longest ago (token buckets with a
refill count as such: dropping one only refills it early); entries without an expiry are
never evicted, so when only those are left the write fails with ``StoreFull`` and the store
is unchanged.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["DEFAULT_MAX_BYTES", "KeyValueStore", "StoreFull", "TakeResult", "take_result"]

SWEEP_EVERY = 30.0
DEFAULT_MAX_BYTES = 64 << 20
ENTRY_OVERHEAD = 300  # bytes CPython spends on an entry besides its key and value (tracemalloc)
_BUCKET_COST = 64  # a bucket's three floats, besides its key and the overhead
_BUCKET_KEY = b"\xff"  # in the eviction order, a bucket's key (no UTF-8 key starts with it)


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


def token_wait(tokens: float, refill_per_second: float) -> float:
    """Seconds until a bucket holding `tokens` has a whole one: 0.0 now, inf if it never refills."""
    if tokens >= 1.0:
        return 0.0
    return (1.0 - tokens) / refill_per_second if refill_per_second > 0 else math.inf


class StoreFull(ValueError):
    """The store is at capacity and holds nothing it may evict (only values without a TTL)."""


class KeyValueStore:
    """Bytes and integers under string-like byte keys, with expiry, incr and token buckets."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes must be positive")
        self._clock = clock
        self.max_bytes = max_bytes
        self._values: dict[bytes, tuple[bytes | int, float]] = {}  # key -> (value, expires_at)
        # key -> [tokens, stamp, full_at]; a list, mutated in place on the hot path.
        self._buckets: dict[bytes, list[float]] = {}
        # What may be evicted, written longest ago first (bucket keys behind _BUCKET_KEY).
        self._aging: OrderedDict[bytes, None] = OrderedDict()
        self._bytes = 0
        self._next_sweep = clock() + SWEEP_EVERY

    def now(self) -> float:
        """The engine's clock."""
        return self._clock()

    @property
    def used_bytes(self) -> int:
        """The bytes counted against ``max_bytes`` now."""
        return self._bytes

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
        self._put(key, value, _expiry(now, ttl))
        self._maybe_sweep(now)

    def compare_and_set(
        self, key: bytes, expected: bytes | None, value: bytes, ttl: float | None = None
    ) -> bool:
        """Store ``value`` only if the live value is ``expected`` (None: only if absent)."""
        now = self._clock()
        expires = _expiry(now, ttl)
        if self.get(key) != expected:
            return False
        self._put(key, value, expires)
        self._maybe_sweep(now)
        return True

    def delete(self, key: bytes) -> bool:
        """Remove ``key``; True when a live value was there."""
        existed = self._live(key, self._clock()) is not None
        self._drop(key)
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
        self._put(key, value, expires)
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
            self._make_room(len(key) + _BUCKET_COST + ENTRY_OVERHEAD, _BUCKET_KEY + key)
            self._bytes += len(key) + _BUCKET_COST + ENTRY_OVERHEAD
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
        self._age(_BUCKET_KEY + key, bucket[2])
        self._maybe_sweep(now)
        wait = token_wait(tokens, refill_per_second)
        result: TakeResult = take_result(TakeResult, (allowed, tokens, wait))
        return result

    # -- prefixes (cache clear and size) ----------------------------------------------------

    def clear_prefix(self, prefix: bytes) -> int:
        """Remove every value and bucket whose key starts with ``prefix``; how many values."""
        doomed = [key for key in self._values if key.startswith(prefix)]
        now = self._clock()
        live = sum(1 for key in doomed if self._values[key][1] > now)
        for key in doomed:
            self._drop(key)
        for key in [key for key in self._buckets if key.startswith(prefix)]:
            self._drop_bucket(key)
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
            self._drop(key)
        return count

    def __len__(self) -> int:
        return len(self._values) + len(self._buckets)

    # -- housekeeping -----------------------------------------------------------------------

    def _live(self, key: bytes, now: float) -> bytes | int | None:
        entry = self._values.get(key)
        if entry is None:
            return None
        if entry[1] <= now:
            self._drop(key)
            return None
        return entry[0]

    def _put(self, key: bytes, value: bytes | int, expires: float) -> None:
        """Store an entry, evicting others first if it does not fit (``StoreFull``)."""
        cost = _cost(key, value)
        old = self._values.get(key)
        growth = cost - (_cost(key, old[0]) if old is not None else 0)
        if growth > 0:
            self._make_room(growth, key)
        self._bytes += growth
        self._values[key] = (value, expires)
        self._age(key, expires)

    def _age(self, key: bytes, expires: float) -> None:
        """Note that ``key`` (in the eviction order's naming) was just written."""
        aging = self._aging
        if expires == math.inf:
            aging.pop(key, None)
        else:
            aging[key] = None
            aging.move_to_end(key)

    def _make_room(self, needed: int, keep: bytes) -> None:
        """Evict until ``needed`` more bytes fit, sparing ``keep``; ``StoreFull`` if it cannot."""
        aging = self._aging
        if self._bytes + needed <= self.max_bytes:
            return
        spared = aging.pop(keep, False) is None  # never evict what is being written
        try:
            while self._bytes + needed > self.max_bytes:
                if not aging:
                    raise StoreFull(
                        f"the store is full: {self._bytes} of its {self.max_bytes} bytes are "
                        "values without a TTL, which are never evicted; give values a TTL, "
                        "delete some, or raise the capacity"
                    )
                victim = next(iter(aging))
                if victim[:1] == _BUCKET_KEY:
                    self._drop_bucket(victim[1:])
                else:
                    self._drop(victim)
        finally:
            if spared:
                aging[keep] = None

    def _drop(self, key: bytes) -> None:
        entry = self._values.pop(key, None)
        if entry is not None:
            self._bytes -= _cost(key, entry[0])
            self._aging.pop(key, None)

    def _drop_bucket(self, key: bytes) -> None:
        if self._buckets.pop(key, None) is not None:
            self._bytes -= len(key) + _BUCKET_COST + ENTRY_OVERHEAD
            self._aging.pop(_BUCKET_KEY + key, None)

    def _maybe_sweep(self, now: float) -> None:
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_EVERY
        for key in [k for k, (_, expires) in self._values.items() if expires <= now]:
            self._drop(key)
        for key in [k for k, bucket in self._buckets.items() if bucket[2] <= now]:
            self._drop_bucket(key)


def _cost(key: bytes, value: bytes | int) -> int:
    return len(key) + (len(value) if isinstance(value, bytes) else 8) + ENTRY_OVERHEAD


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
