"""A `socketify.state.cache.TtlCache` backend in a key/value `Store` shared across workers or hosts.

    cache = TtlCache(default_ttl=60, shared=True)                 # every worker of the server
    cache = TtlCache(default_ttl=60, store=RedisStore(url))       # every host

`TtlCache` keeps the policy (default TTL, value tags, JSON helpers) and hands bytes with a TTL
to its backend. `KeyValueCacheBackend` passes them to a `socketify.state.stores.Store`
(`SharedStore` by default, `RedisStore`, ...), whose keys expire by themselves, on the store's
clock: a fake clock set with `TtlCache.set_clock` drives only local caches. Every key is put
under the cache's `namespace`, which is also what `clear()` and `size()` cover, through the
store's prefix operations. While the store cannot be reached (Redis down), every operation
raises `socketify.core.errors.StateUnavailable`, which a request answers 503 with `Retry-After`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KeyValueCacheBackend"]


class KeyValueCacheBackend:
    """The `CacheBackend` protocol over a shared key/value store."""

    def __init__(self, store: Any = None, *, namespace: str = "cache:") -> None:
        if store is None:
            from socketify.state.shared_store import SharedStore

            store = SharedStore()
        self.store = store
        self.namespace = namespace

    def get(self, key: str, now: float) -> bytes | None:
        """The live value of `key`, or None."""
        value: bytes | None = self.store.get(self.namespace + key)
        return value

    def set(self, key: str, value: bytes, ttl: float | None, now: float) -> None:
        """Store `value` for `ttl` seconds (None: no expiry)."""
        self.store.set(self.namespace + key, value, ttl)

    def delete(self, key: str, now: float) -> bool:
        """Remove `key`; True when a live entry was there."""
        return bool(self.store.delete(self.namespace + key))

    def clear(self) -> None:
        """Remove every entry of this cache (its namespace) from the shared store."""
        self.store.clear_prefix(self.namespace)

    def purge(self, now: float) -> tuple[int, int]:
        """Expired entries leave the shared store by themselves: (0, live entries)."""
        return 0, int(self.store.count_prefix(self.namespace))
