"""`RedisStore`: the state store over Redis, so several hosts share sessions, limits, caches.

    store = RedisStore("redis://10.0.0.5:6379/0")   # or SOCKETIFY_STATE_URL=redis://...
    store.set("k", b"v", ttl=60)

Theory of operation. `RedisStore` speaks the same operations as the cross-worker store
(`socketify.state.stores.Store` plus `compare_and_set`, `clear_prefix`, `count_prefix`). Each is one
Redis command or one Lua script, so each is atomic across every host. The token bucket runs in
a script on Redis's own clock (`TIME`); the caller's `now` is ignored, because hosts'
monotonic clocks are unrelated. `incr` with a TTL sets the expiry only when it creates the key.
The bus over Redis is `socketify.state.redis.bus.RedisBus`.

Bounded keys. With `max_entries=N`, the keys under `bounded_prefix` written with a TTL (`set`,
`compare_and_set`: sessions) are at most N. A sorted set beside them indexes each by its
expiry time, updated by the same script as the write: the script drops index entries whose
keys have expired, then, past N, deletes the soonest-expiring keys (never the one it just
wrote). The index key, `socketify-bound:<prefix><bounded_prefix>`, is outside the store's
prefix, and the scripts name keys they did not declare, so this needs a standalone Redis (or
a cluster slot holding them all).

Outages. The client waits at most `connect_timeout` (0.5 s) to connect and `timeout` (1 s)
for a reply, with no retries (`socketify.state.redis.client`; the URL's query overrides
both). Every operation goes through the process's breaker for that Redis
(`socketify.state.breaker`): the first failure is logged once and raises
`socketify.core.errors.StateUnavailable` (answered 503 with `Retry-After`), later calls fail at
once while one probe a second checks whether Redis is back, and its return is logged once.
redis-py loads the scripts again after a restart. Under gevent (every worker) redis-py's
sockets are cooperative and their timeouts fire. Requires the `redis` extra.
"""

from __future__ import annotations

import math
from typing import Any

from socketify.state.redis.client import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_TIMEOUT,
    DEFAULT_URL,
    breaker_of,
    connect,
    describe,
    glob_escape,
)
from socketify.state.stores import TakeResult
from workers.shared.kvstore import token_wait

__all__ = ["RedisStore"]

# KEYS[1] bucket; ARGV capacity, refill per second. Returns {allowed, tokens, wait} as text.
_TAKE = """
local capacity = tonumber(ARGV[1])
local refill = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local b = redis.call('HMGET', KEYS[1], 't', 's')
local tokens = tonumber(b[1])
local stamp = tonumber(b[2])
if tokens == nil or stamp == nil then
  tokens = capacity
elseif now > stamp then
  tokens = math.min(capacity, tokens + (now - stamp) * refill)
end
local allowed = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
end
redis.call('HSET', KEYS[1], 't', string.format('%.17g', tokens), 's', string.format('%.17g', now))
if refill > 0 then
  redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) / refill * 1000) + 1000)
end
return {allowed, string.format('%.17g', tokens)}
"""

# KEYS[1] counter; ARGV amount, ttl in ms ('' for none). The expiry is set only on creation.
_INCR = """
if ARGV[2] ~= '' then
  redis.call('SET', KEYS[1], 0, 'NX', 'PX', ARGV[2])
end
return redis.call('INCRBY', KEYS[1], ARGV[1])
"""

# A write, maybe conditional, maybe bounded. KEYS[1] the key; KEYS[2] the index of its bounded
# prefix (absent: not bounded). ARGV[1] value; ARGV[2] ttl in ms ('' for none); ARGV[3] the
# condition: '' (none), 'absent' or 'equals'; ARGV[4] the expected value; ARGV[5] the capacity.
# Returns 1 if it wrote, 0 if the condition did not hold.
_WRITE = """
local condition = ARGV[3]
if condition ~= '' then
  local current = redis.call('GET', KEYS[1])
  if condition == 'absent' then
    if current then return 0 end
  elseif current ~= ARGV[4] then
    return 0
  end
end
if ARGV[2] == '' then
  redis.call('SET', KEYS[1], ARGV[1])
  if KEYS[2] then redis.call('ZREM', KEYS[2], KEYS[1]) end  -- no expiry: no longer bounded
  return 1
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if not KEYS[2] then return 1 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), KEYS[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)  -- their keys have expired
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[5])
if over > 0 then
  local evicted = 0
  for _, victim in ipairs(redis.call('ZRANGE', KEYS[2], 0, over)) do
    if evicted < over and victim ~= KEYS[1] then
      redis.call('DEL', victim)
      redis.call('ZREM', KEYS[2], victim)
      evicted = evicted + 1
    end
  end
end
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[2], last[2])  -- the index goes when its last key does
return 1
"""

# KEYS[1] the key, KEYS[2] its index. Returns how many keys it removed (0 or 1).
_DELETE_BOUNDED = """
redis.call('ZREM', KEYS[2], KEYS[1])
return redis.call('DEL', KEYS[1])
"""


class RedisStore:
    """The store operations on Redis (keys under `prefix`); see the module doc for options."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        prefix: str = "socketify:",
        client: Any = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
        max_entries: int | None = None,
        bounded_prefix: str = "",
    ) -> None:
        if max_entries is not None and max_entries < 1:
            raise ValueError("max_entries must be at least 1 (or None for no bound)")
        self.url = url
        self.prefix = prefix
        self.redis = client if client is not None else connect(url, timeout, connect_timeout)
        self.breaker = breaker_of(self.redis)
        self.max_entries = max_entries
        self.bounded_prefix = bounded_prefix
        self.index_key = f"socketify-bound:{prefix}{bounded_prefix}"
        self._call = self.breaker.call
        self._take = self.redis.register_script(_TAKE)
        self._incr = self.redis.register_script(_INCR)
        self._write = self.redis.register_script(_WRITE)
        self._delete_bounded = self.redis.register_script(_DELETE_BOUNDED)

    def get(self, key: str) -> bytes | None:
        """The value of `key`, or None when absent or expired."""
        value: bytes | None = self._call(self.redis.get, self.prefix + key)
        return value

    def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        """Store `value` under `key`; `ttl` seconds until it expires (None: never)."""
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError("store values are bytes; encode them first")
        if self.bounds(key):
            self._write_script(key, value, ttl, "", b"")
        else:
            self._call(self.redis.set, self.prefix + key, bytes(value), px=_ms(ttl))

    def compare_and_set(
        self, key: str, expected: bytes | None, value: bytes, ttl: float | None = None
    ) -> bool:
        """Write `value` (with `ttl`) only if `key` holds `expected` (None: only if absent).

        Atomic across every host; returns whether it wrote.
        """
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError("store values are bytes; encode them first")
        if expected is None:
            return self._write_script(key, value, ttl, "absent", b"")
        return self._write_script(key, value, ttl, "equals", bytes(expected))

    def delete(self, key: str) -> bool:
        """Remove `key`; True if it existed."""
        if self.bounds(key):
            removed = self._call(self._delete_bounded, keys=[self.prefix + key, self.index_key])
        else:
            removed = self._call(self.redis.delete, self.prefix + key)
        return bool(removed)

    def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        """Add `amount` atomically and return the result; `ttl` applies on creation only."""
        ms = _ms(ttl)
        return int(
            self._call(
                self._incr, keys=[self.prefix + key], args=[amount, "" if ms is None else ms]
            )
        )

    def take(
        self, key: str, capacity: float, refill_per_second: float, now: float | None = None
    ) -> TakeResult:
        """Token bucket in one script on Redis's clock (`now` is ignored across hosts)."""
        allowed, text = self._call(
            self._take,
            keys=[self.prefix + key],
            args=[repr(float(capacity)), repr(float(refill_per_second))],
        )
        tokens = float(text)
        wait = token_wait(tokens, refill_per_second)
        return TakeResult(bool(allowed), tokens, wait)

    def clear_prefix(self, prefix: str) -> int:
        """Remove every key starting with `prefix`; returns how many there were."""
        removed: int = self._call(self._clear, prefix)
        return removed

    def count_prefix(self, prefix: str) -> int:
        """How many live keys start with `prefix` (a SCAN: for sizes, not hot paths)."""
        pattern = glob_escape(self.prefix + prefix) + "*"
        counted: int = self._call(
            lambda: sum(1 for _ in self.redis.scan_iter(match=pattern, count=500))
        )
        return counted

    def bounds(self, key: str) -> bool:
        """Whether writes of `key` with a TTL count against `max_entries`."""
        return self.max_entries is not None and key.startswith(self.bounded_prefix)

    def close(self) -> None:
        """Release the connection pool."""
        self.redis.close()

    def _write_script(
        self, key: str, value: bytes, ttl: float | None, condition: str, expected: bytes
    ) -> bool:
        ms = _ms(ttl)
        keys = [self.prefix + key]
        if self.bounds(key):
            keys.append(self.index_key)
        args = [bytes(value), "" if ms is None else ms, condition, expected, self.max_entries or 0]
        return bool(self._call(self._write, keys=keys, args=args))

    def _clear(self, prefix: str) -> int:
        removed = 0
        batch: list[bytes] = []
        # Keys under the bounded prefix leave its index too, or they would hold places there.
        indexed = self.max_entries is not None and (
            prefix.startswith(self.bounded_prefix) or self.bounded_prefix.startswith(prefix)
        )
        for key in self.redis.scan_iter(match=glob_escape(self.prefix + prefix) + "*", count=500):
            batch.append(key)
            if len(batch) >= 500:
                removed += self._remove(batch, indexed)
                batch = []
        if batch:
            removed += self._remove(batch, indexed)
        return removed

    def _remove(self, keys: list[bytes], indexed: bool) -> int:
        if not indexed:
            return int(self.redis.delete(*keys))
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(*keys)
        pipe.zrem(self.index_key, *keys)
        deleted, _ = pipe.execute()
        return int(deleted)

    def __repr__(self) -> str:
        bound = f" max_entries={self.max_entries}" if self.max_entries is not None else ""
        return f"<RedisStore {describe(self.redis)} prefix={self.prefix!r}{bound}>"


def _ms(ttl: float | None) -> int | None:
    if ttl is None:
        return None
    if not ttl > 0:
        raise ValueError("ttl must be positive seconds (or None for no expiry)")
    return max(1, math.ceil(ttl * 1000))
