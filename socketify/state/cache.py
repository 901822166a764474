"""A TTL cache for strings and bytes, with JSON helpers and an injectable clock.

    cache = TtlCache(default_ttl=300)          # seconds; 0 means entries never expire
    cache.set("user:42", payload)              # uses default_ttl
    cache.set_json("cfg", {"n": 1}, ttl=30)
    cache.get_json("cfg")                      # {"n": 1}, or None once expired

Theory of operation. `TtlCache` owns the policy — which TTL applies, what "now" is, how str,
bytes and JSON values are encoded — and hands plain storage operations to a `CacheBackend`.
An entry is expired when now >= its expiry; backends drop expired entries lazily whenever
they touch them, so there is no background sweeper and no maximum size (`purge_expired()`
reclaims memory on demand).

`MemoryBackend`, the default, is a dict behind a lock: one per process, so in a pre-fork
server each worker has its own. The backend contract has the shape of the project's
key/value stores (bytes values, a `ttl` in seconds or None, each call atomic on its own), so a
backend shared across workers is a thin adapter over such a store. The cache passes `now` from
its own clock; a machine-local backend honours it, a remote one may use its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import orjson

__all__ = ["CacheBackend", "Clock", "MemoryBackend", "TtlCache", "Value"]

Value = str | bytes
Clock = Callable[[], float]

# Values reach the backend as bytes with a one-byte tag, so str and bytes both round-trip
# through any bytes-only store.
_STR, _BYTES = b"s", b"b"


class CacheBackend(Protocol):
    """Storage behind a `TtlCache`: bytes values, each method atomic, expiry judged at `now`."""

    def get(self, key: str, now: float) -> bytes | None:
        """The live value of `key`, or None (an expired entry is removed)."""
        ...

    def set(self, key: str, value: bytes, ttl: float | None, now: float) -> None:
        """Store `value` for `ttl` seconds from `now`; None means it never expires."""
        ...

    def delete(self, key: str, now: float) -> bool:
        """Remove `key`; True when a live entry was there."""
        ...

    def clear(self) -> None:
        """Remove every entry."""
        ...

    def purge(self, now: float) -> tuple[int, int]:
        """Remove expired entries; return (removed, remaining)."""
        ...


class MemoryBackend:
    """The in-process `CacheBackend`: a dict of key -> (value, expires_at) behind a lock."""

    __slots__ = ("_entries", "_lock")

    def __init__(self) -> None:
        self._entries: dict[str, tuple[bytes, float | None]] = {}
        # Under gevent's monkey-patching this is a cooperative lock; nothing here yields while
        # holding it, so it never blocks the hub either way.
        self._lock = threading.Lock()

    def get(self, key: str, now: float) -> bytes | None:
        """The live value of `key`, or None (an expired entry is removed)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            value, expires_at = entry
            if expires_at is not None and now >= expires_at:
                del self._entries[key]
                return None
            return value

    def set(self, key: str, value: bytes, ttl: float | None, now: float) -> None:
        """Store `value` for `ttl` seconds from `now`; None means it never expires."""
        expires_at = None if ttl is None else now + ttl
        with self._lock:
            self._entries[key] = (value, expires_at)

    def delete(self, key: str, now: float) -> bool:
        """Remove `key`; True when a live entry was there."""
        with self._lock:
            entry = self._entries.pop(key, None)
        return entry is not None and (entry[1] is None or now < entry[1])

    def clear(self) -> None:
        """Remove every entry."""
        with self._lock:
            self._entries.clear()

    def purge(self, now: float) -> tuple[int, int]:
        """Remove expired entries; return (removed, remaining)."""
        with self._lock:
            expired = [
                key
                for key, (_, expires_at) in self._entries.items()
                if expires_at is not None and now >= expires_at
            ]
            for key in expired:
                del self._entries[key]
            return len(expired), len(self._entries)


def _check_ttl(ttl: float, name: str) -> float:
    if not ttl >= 0:  # also refuses NaN
        raise ValueError(f"{name} must be >= 0 seconds (0 means the default), got {ttl!r}")
    return ttl


class TtlCache:
    """Key -> str/bytes with per-entry expiry; TTLs in seconds, 0 meaning `default_ttl`."""

    __slots__ = ("_backend", "_clock", "default_ttl")

    def __init__(
        self,
        default_ttl: float = 0,
        *,
        clock: Clock | None = None,
        backend: CacheBackend | None = None,
        shared: bool = False,
        store: Any = None,
    ) -> None:
        self.default_ttl = _check_ttl(default_ttl, "default_ttl")
        # monotonic: wall-clock jumps (NTP, DST) must not expire or revive entries.
        self._clock: Clock = clock or time.monotonic
        if backend is None and (shared or store is not None):
            # Across workers (SharedStore) or hosts (a key/value Store such as RedisStore).
            from socketify.state.shared_cache import KeyValueCacheBackend

            backend = KeyValueCacheBackend(store)
        self._backend: CacheBackend = backend if backend is not None else MemoryBackend()

    def set_clock(self, clock: Clock) -> None:
        """Replace the time source (seconds, monotonic); for tests."""
        self._clock = clock

    def set(self, key: str, value: Value, ttl: float = 0) -> None:
        """Store `value` for `ttl` seconds (0: `default_ttl`; a default of 0: forever)."""
        if isinstance(value, str):
            data = _STR + value.encode()
        elif isinstance(value, bytes):
            data = _BYTES + value
        else:
            raise TypeError(
                f"cache values are str or bytes, not {type(value).__name__}; use set_json()"
            )
        effective = _check_ttl(ttl, "ttl") or self.default_ttl
        self._backend.set(key, data, effective if effective > 0 else None, self._clock())

    def get(self, key: str, default: Value | None = None) -> Value | None:
        """The value of `key`, or `default` when it is missing or expired."""
        data = self._backend.get(key, self._clock())
        if data is None:
            return default
        return data[1:].decode() if data[:1] == _STR else data[1:]

    def contains(self, key: str) -> bool:
        """True when `key` holds a live entry."""
        return self._backend.get(key, self._clock()) is not None

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.contains(key)

    def erase(self, key: str) -> bool:
        """Remove `key`; True when it held a live entry."""
        return self._backend.delete(key, self._clock())

    def clear(self) -> None:
        """Remove every entry."""
        self._backend.clear()

    def size(self) -> int:
        """The number of live entries (expired ones are purged first)."""
        return self._backend.purge(self._clock())[1]

    def __len__(self) -> int:
        return self.size()

    def purge_expired(self) -> int:
        """Remove every expired entry now; return how many were removed."""
        return self._backend.purge(self._clock())[0]

    def set_json(self, key: str, value: Any, ttl: float = 0) -> None:
        """Store `value` serialized as compact JSON."""
        self.set(key, orjson.dumps(value).decode(), ttl)

    def get_json(self, key: str, default: Any = None) -> Any:
        """The JSON value of `key`; `default` when missing, expired, or not valid JSON."""
        raw = self.get(key)
        if raw is None:
            return default
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return default
