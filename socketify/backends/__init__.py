"""State backends beyond one machine: `socketify.backends.redis` (`RedisStore`) and
`socketify.backends.redis_bus` (`RedisBus`), whose outages `socketify.backends.breaker` turns
into quick 503s."""

from __future__ import annotations

__all__: list[str] = []
