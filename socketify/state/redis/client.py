"""The Redis clients of the state backends: timeouts, no retries, one breaker per server.

`connect(url)` makes a `redis.Redis` that waits at most `connect_timeout` (0.5 s) to connect
and `timeout` (1 s) for any reply, and retries nothing, so an operation against a Redis that
stopped answering ends within those bounds; the URL's query overrides both, as redis-py reads
it (`redis://host:6379/0?socket_timeout=2&socket_connect_timeout=1`). `breaker_of(client)` is
the process's `socketify.state.breaker.Breaker` for the server the client talks to, shared
by the store and the bus of that server, so an outage is logged once per process. Requires
the `redis` extra.
"""

from __future__ import annotations

from typing import Any

from socketify.state.breaker import Breaker, breaker_for

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "DEFAULT_URL",
    "breaker_of",
    "connect",
    "describe",
    "glob_escape",
]

DEFAULT_URL = "redis://127.0.0.1:6379/0"
DEFAULT_CONNECT_TIMEOUT = 0.5  # seconds to open a connection
DEFAULT_TIMEOUT = 1.0  # seconds to wait for any reply


def connect(
    url: str,
    timeout: float | None = DEFAULT_TIMEOUT,
    connect_timeout: float | None = DEFAULT_CONNECT_TIMEOUT,
) -> Any:
    """A `redis.Redis` for `url` with these timeouts (the URL's query wins) and no retries."""
    try:
        import redis
    except ImportError:
        raise ImportError(
            "the Redis backend needs the redis package: pip install 'socketify-gevent[redis]'"
        ) from None
    # No `retry`: a pool made from a URL retries nothing unless the URL's query asks.
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=connect_timeout)


def breaker_of(client: Any) -> Breaker:
    """This process's breaker for the Redis server `client` talks to."""
    from redis import exceptions

    outage = (
        exceptions.ConnectionError,  # refused, reset, loading, authentication, pool exhausted
        exceptions.TimeoutError,
        exceptions.ReadOnlyError,  # a replica after a failover
        exceptions.MasterDownError,
        OSError,
    )
    return breaker_for(describe(client), outage)


def describe(client: Any) -> str:
    """`Redis 10.0.0.5:6379/0`: where a client connects (never its password)."""
    try:
        kwargs = client.connection_pool.connection_kwargs
    except AttributeError:
        return f"Redis {type(client).__name__}@{id(client):x}"
    db = kwargs.get("db", 0)
    if kwargs.get("path"):
        return f"Redis unix:{kwargs['path']}?db={db}"
    return f"Redis {kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{db}"


def glob_escape(text: str) -> str:
    """`text` with the glob characters of Redis's MATCH patterns escaped."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
