"""State beyond one machine: the store (`RedisStore`) and the bus (`RedisBus`) over Redis.

`store` holds the operations, `bus` the publish/subscribe channel, and `client` the connection
settings both share (timeouts, the URL's options, the breaker that turns an outage into 503s).
Requires the `redis` extra.
"""

from __future__ import annotations

from socketify.state.redis.bus import RedisBus
from socketify.state.redis.client import DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT
from socketify.state.redis.store import RedisStore

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "DEFAULT_TIMEOUT", "RedisBus", "RedisStore"]
