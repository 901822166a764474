"""State backends beyond one machine: `socketify.backends.redis` (`RedisStore`, `RedisBus`)."""

from __future__ import annotations

__all__: list[str] = []
