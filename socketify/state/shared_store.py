"""`SharedStore`: the `socketify.state.stores.Store` every worker of the server shares.

    store = SharedStore()                    # sessions, rate limits and caches use this
    store = SharedStore(url="redis://10.0.0.5:6379/0")   # several hosts (also via env)

Theory of operation. Which store is behind it is decided on first use in each process, not
at construction, because middleware is usually built when the app module is imported, which
may happen in the master before the fork (`--preload`):

1. a URL (the `url` argument, else the `SOCKETIFY_STATE_URL` environment variable): a
   `socketify.state.redis.RedisStore`, shared by every host that uses the same Redis;
2. else, in a worker of the pre-fork master: the cross-worker store
   (`workers.shared.state.client()`: a hash table in shared memory the master made before forking,
   which each worker reads and updates itself, with the master's own store for entries too large for
   it), shared by every worker of this server and kept when any of them dies;
3. else (`workers=0`, `TestClient`, scripts): one store private to this process.

The choice is remade in a forked child. Every operation is atomic on its own; `take()` is a
token bucket in one step, so N workers never allow N times the quota. `namespace` prefixes
every key, to keep unrelated users of one store apart.

With Redis, `max_entries=N` bounds the keys under the namespace (or `bounded_prefix`) written
with a TTL: past N, the soonest-expiring go (see `socketify.state.redis`). While Redis is
unreachable every operation raises `socketify.core.errors.StateUnavailable`, answered 503 with
`Retry-After`, after waiting at most the client's timeouts (0.5 s to connect, 1 s per reply;
`?socket_connect_timeout=` and `?socket_timeout=` in the URL change them).
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

from socketify.state.stores import TakeResult

__all__ = ["STATE_URL_ENV", "SharedStore", "local_state"]

STATE_URL_ENV = "SOCKETIFY_STATE_URL"

_local: Any = None
_local_lock = threading.Lock()
_fork_epoch = 0  # bumped in every forked child: cached backends are re-resolved there
_stores: weakref.WeakSet[SharedStore] = weakref.WeakSet()
_DIRECT = ("get", "set", "take")  # what a store with no namespace hands to its backend


def _after_fork() -> None:
    global _fork_epoch, _local
    _fork_epoch += 1
    _local = None  # a child must not believe it shares its parent's private store
    for store in list(_stores):
        store.unbind()


os.register_at_fork(after_in_child=_after_fork)


def local_state() -> Any:
    """The process-wide store used when there is neither a URL nor a master."""
    global _local
    with _local_lock:
        if _local is None:
            from workers.shared.state import LocalState

            _local = LocalState()
        return _local


class SharedStore:
    """A `Store` shared by every worker (and, with a Redis URL, every host)."""

    def __init__(
        self,
        namespace: str = "",
        *,
        url: str | None = None,
        max_entries: int | None = None,
        bounded_prefix: str | None = None,
    ) -> None:
        if max_entries is not None and max_entries < 1:
            raise ValueError("max_entries must be at least 1 (or None for no bound)")
        self.namespace = namespace
        self._url = url
        # With Redis: at most `max_entries` TTL keys under `bounded_prefix` (full key names).
        self.max_entries = max_entries
        self.bounded_prefix = namespace if bounded_prefix is None else bounded_prefix
        self._backend: Any = None
        self._epoch = -1
        # The backend's methods, bound once per process (see _bind).
        self._get: Any = None
        self._set: Any = None
        self._take: Any = None
        _stores.add(self)

    @property
    def backend(self) -> Any:
        """The store actually used in this process (resolved on first use)."""
        if self._epoch != _fork_epoch or self._backend is None:
            self._bind()
        return self._backend

    def without_namespace(self) -> SharedStore:
        """The same shared store with no namespace (the caller prefixes keys itself)."""
        return SharedStore(
            url=self._url, max_entries=self.max_entries, bounded_prefix=self.bounded_prefix
        )

    def _bind(self) -> None:
        backend = self._resolve()
        self._backend = backend
        self._get, self._set, self._take = backend.get, backend.set, backend.take
        self._epoch = _fork_epoch
        if not self.namespace:
            # PERF: with no namespace to add, the backend's own methods answer (instance
            # attributes over the methods below), so `get`, `set` and `take` cost no call
            # of ours; a forked child drops them (`unbind`) and binds its own backend.
            vars(self).update(get=backend.get, set=backend.set, take=backend.take)

    def unbind(self) -> None:
        """Forget this process's backend (a forked child binds its own on first use)."""
        for name in _DIRECT:
            vars(self).pop(name, None)
        self._backend = None
        self._epoch = -1

    @property
    def kind(self) -> str:
        """`"redis"`, `"master"` (the master's shared memory) or `"local"`: where the data
        lives for this process."""
        url = self._url or os.environ.get(STATE_URL_ENV)
        if url:
            return "redis"
        from workers.shared.state import client

        return "master" if client() is not None else "local"

    def _resolve(self) -> Any:
        url = self._url or os.environ.get(STATE_URL_ENV)
        if url:
            from socketify.state.redis import RedisStore

            return RedisStore(url, max_entries=self.max_entries, bounded_prefix=self.bounded_prefix)
        from workers.shared.state import client

        shared = client()
        return shared if shared is not None else local_state()

    # -- the Store protocol ---------------------------------------------------------------

    def get(self, key: str) -> bytes | None:
        """The value of `key`, or None when absent or expired."""
        if self._epoch != _fork_epoch:
            self._bind()
        value: bytes | None = self._get(self.namespace + key)
        return value

    def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        """Store `value` under `key`; `ttl` seconds until it expires (None: never)."""
        if self._epoch != _fork_epoch:
            self._bind()
        self._set(self.namespace + key, value, ttl)

    def compare_and_set(
        self, key: str, expected: bytes | None, value: bytes, ttl: float | None = None
    ) -> bool:
        """Store `value` only if the current value equals `expected` (None: only if absent)."""
        return bool(self.backend.compare_and_set(self.namespace + key, expected, value, ttl))

    def delete(self, key: str) -> bool:
        """Remove `key`; True if it existed."""
        return bool(self.backend.delete(self.namespace + key))

    def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        """Add `amount` atomically; `ttl` applies when the key is created."""
        return int(self.backend.incr(self.namespace + key, amount, ttl))

    def take(
        self, key: str, capacity: float, refill_per_second: float, now: float | None = None
    ) -> TakeResult:
        """Refill the token bucket `key`, then take one token if one is there."""
        if self._epoch != _fork_epoch:
            self._bind()
        result: TakeResult = self._take(self.namespace + key, capacity, refill_per_second, now)
        return result

    # -- beyond the protocol: what a shared cache needs -----------------------------------

    def clear_prefix(self, prefix: str) -> int:
        """Remove every key starting with `prefix`; returns how many live values went."""
        return int(self.backend.clear_prefix(self.namespace + prefix))

    def count_prefix(self, prefix: str) -> int:
        """How many live keys start with `prefix`."""
        return int(self.backend.count_prefix(self.namespace + prefix))

    def __repr__(self) -> str:
        return f"<SharedStore namespace={self.namespace!r} kind={self.kind}>"
