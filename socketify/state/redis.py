"""Store and Bus over Redis, so several hosts share sessions, limits, caches and Hub rooms.

    store = RedisStore("redis://10.0.0.5:6379/0")   # or SOCKETIFY_STATE_URL=redis://...
    bus = RedisBus("redis://10.0.0.5:6379/0")
    bus.subscribe("room:lobby", deliver)            # on every host, every worker
    bus.publish("room:lobby", frame_bytes)

Theory of operation. `RedisStore` speaks the same operations as the cross-worker store
(`socketify.state.stores.Store` plus `clear_prefix`/`count_prefix`). Each is one Redis command or
one Lua script, so each is atomic across every host. The token bucket runs in a script on
Redis's own clock (`TIME`); the caller's `now` is ignored, because hosts' monotonic clocks
are unrelated. `incr` with a TTL sets the expiry only when it creates the key.

`RedisBus` publishes on one Redis channel per bus channel (under `prefix`) and listens with
one pattern subscription per process. Redis delivers each message to every subscribed
process, the publisher's own included, so the publisher does not deliver locally: each
process sees each message exactly once, in each publisher's order. Messages published while
a process is disconnected are lost, as with any Redis pub/sub.

Under gevent (every worker) redis-py's sockets are cooperative; the listener is a thread,
which monkey-patching makes a greenlet. Requires the `redis` extra.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from typing import Any

from socketify.state.stores import TakeResult

__all__ = ["RedisBus", "RedisStore"]

log = logging.getLogger("socketify.state")

DEFAULT_URL = "redis://127.0.0.1:6379/0"

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


def _client(url: str) -> Any:
    try:
        import redis
    except ImportError:
        raise ImportError(
            "the Redis backend needs the redis package: pip install 'socketify-gevent[redis]'"
        ) from None
    return redis.Redis.from_url(url)


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class RedisStore:
    """The store operations on Redis (keys under `prefix`)."""

    def __init__(
        self, url: str = DEFAULT_URL, *, prefix: str = "socketify:", client: Any = None
    ) -> None:
        self.url = url
        self.prefix = prefix
        self.redis = client if client is not None else _client(url)
        self._take = self.redis.register_script(_TAKE)
        self._incr = self.redis.register_script(_INCR)

    def get(self, key: str) -> bytes | None:
        """The value of `key`, or None when absent or expired."""
        value: bytes | None = self.redis.get(self.prefix + key)
        return value

    def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        """Store `value` under `key`; `ttl` seconds until it expires (None: never)."""
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError("store values are bytes; encode them first")
        self.redis.set(self.prefix + key, bytes(value), px=_ms(ttl))

    def delete(self, key: str) -> bool:
        """Remove `key`; True if it existed."""
        return bool(self.redis.delete(self.prefix + key))

    def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        """Add `amount` atomically and return the result; `ttl` applies on creation only."""
        ms = _ms(ttl)
        return int(self._incr(keys=[self.prefix + key], args=[amount, "" if ms is None else ms]))

    def take(
        self, key: str, capacity: float, refill_per_second: float, now: float | None = None
    ) -> TakeResult:
        """Token bucket in one script on Redis's clock (`now` is ignored across hosts)."""
        allowed, text = self._take(
            keys=[self.prefix + key], args=[repr(float(capacity)), repr(float(refill_per_second))]
        )
        tokens = float(text)
        if tokens >= 1.0:
            wait = 0.0
        elif refill_per_second > 0:
            wait = (1.0 - tokens) / refill_per_second
        else:
            wait = math.inf
        return TakeResult(bool(allowed), tokens, wait)

    def clear_prefix(self, prefix: str) -> int:
        """Remove every key starting with `prefix`; returns how many there were."""
        removed = 0
        batch: list[bytes] = []
        for key in self.redis.scan_iter(match=_glob_escape(self.prefix + prefix) + "*", count=500):
            batch.append(key)
            if len(batch) >= 500:
                removed += self.redis.delete(*batch)
                batch.clear()
        if batch:
            removed += self.redis.delete(*batch)
        return removed

    def count_prefix(self, prefix: str) -> int:
        """How many live keys start with `prefix` (a SCAN: for sizes, not hot paths)."""
        pattern = _glob_escape(self.prefix + prefix) + "*"
        return sum(1 for _ in self.redis.scan_iter(match=pattern, count=500))

    def close(self) -> None:
        """Release the connection pool."""
        self.redis.close()

    def __repr__(self) -> str:
        return f"<RedisStore {self.url} prefix={self.prefix!r}>"


def _ms(ttl: float | None) -> int | None:
    if ttl is None:
        return None
    if not ttl > 0:
        raise ValueError("ttl must be positive seconds (or None for no expiry)")
    return max(1, math.ceil(ttl * 1000))


class RedisBus:
    """Publish/subscribe across hosts through Redis; the same interface as `workers.shared.bus`."""

    def __init__(
        self, url: str = DEFAULT_URL, *, prefix: str = "socketify:bus:", client: Any = None
    ) -> None:
        self.url = url
        self.prefix = prefix
        self.redis = client if client is not None else _client(url)
        self._subscribers: dict[str, list[Callable[[bytes], object]]] = {}
        self._pubsub: Any = None
        self._listener: threading.Thread | None = None
        self._closed = False

    def subscribe(self, channel: str, callback: Callable[[bytes], object]) -> _Subscription:
        """Call `callback(payload)` for every message published on `channel` by anyone."""
        self._subscribers[channel] = [*self._subscribers.get(channel, ()), callback]
        self._start()
        return _Subscription(self, channel, callback)

    def publish(self, channel: str, payload: bytes) -> None:
        """Send `payload` to every subscriber of `channel` on every host (this one included)."""
        self.redis.publish(self.prefix + channel, bytes(payload))

    def subscribers(self, channel: str) -> int:
        """How many local callbacks listen on `channel`."""
        return len(self._subscribers.get(channel, ()))

    def close(self) -> None:
        """Stop listening."""
        self._closed = True
        if self._pubsub is not None:
            self._pubsub.close()

    def _start(self) -> None:
        if self._listener is not None:
            return
        pubsub = self._pubsub = self.redis.pubsub()
        pubsub.psubscribe(_glob_escape(self.prefix) + "*")
        # Wait for Redis to confirm: a publish from another connection right after
        # subscribe() returns must already reach us.
        for _ in range(50):
            message = pubsub.get_message(timeout=0.1)
            if message is not None and message.get("type") == "psubscribe":
                break
        self._listener = threading.Thread(target=self._listen, name="redis-bus", daemon=True)
        self._listener.start()

    def _listen(self) -> None:
        skip = len(self.prefix)
        while not self._closed:
            try:
                message = self._pubsub.get_message(timeout=1.0)
            except Exception:
                if self._closed:
                    return
                log.exception("Redis bus connection failed; retrying")
                threading.Event().wait(0.5)
                continue
            if message is None or message.get("type") != "pmessage":
                continue
            channel = message["channel"][skip:].decode()
            for callback in self._subscribers.get(channel, ()):
                try:
                    callback(message["data"])
                except Exception:
                    log.exception("bus subscriber %r of %r failed", callback, channel)

    def _remove(self, channel: str, callback: Callable[[bytes], object]) -> None:
        callbacks = [c for c in self._subscribers.get(channel, ()) if c is not callback]
        if callbacks:
            self._subscribers[channel] = callbacks
        else:
            self._subscribers.pop(channel, None)


class _Subscription:
    __slots__ = ("_bus", "_callback", "_channel")

    def __init__(self, bus: RedisBus, channel: str, callback: Callable[[bytes], object]) -> None:
        self._bus = bus
        self._channel = channel
        self._callback = callback

    def cancel(self) -> None:
        """Stop delivering to this callback."""
        self._bus._remove(self._channel, self._callback)
