"""The metrics socketify records itself (the application adds its own with `metrics.Counter`...).

They are described here once, so the workers that record them and the master that reads them
(health checks the state backend gauge) agree on every name.
"""

from __future__ import annotations

from collections.abc import Iterable

from socketify.metrics.families import DEFAULT_BUCKETS, Family

__all__ = [
    "BACKEND_UP",
    "BYTES",
    "CONNECTIONS",
    "DB_POOL_IN_USE",
    "DB_POOL_WAITS",
    "IN_FLIGHT",
    "REQUESTS",
    "WEBSOCKET_MESSAGES",
    "duration_family",
]

REQUESTS = Family(
    "socketify_http_requests_total",
    "counter",
    "HTTP requests answered, by method, route pattern and status",
    ("method", "route", "status"),
)
IN_FLIGHT = Family(
    "socketify_http_requests_in_flight", "gauge", "HTTP requests being answered right now"
)


CONNECTIONS = Family(
    "socketify_connections",
    "gauge",
    "Open client connections by protocol: http1, h2, websocket, sse, tcp",
    ("protocol",),
)

BYTES = Family(
    "socketify_bytes_total",
    "counter",
    "Bytes the kernel moved on client connections (TLS and protocol framing included), "
    "by direction: in (received) or out (sent)",
    ("direction",),
)


def duration_family(buckets: Iterable[float] = DEFAULT_BUCKETS) -> Family:
    """The request duration histogram with these bucket bounds (seconds)."""
    return Family(
        "socketify_http_request_duration_seconds",
        "histogram",
        "Time from the request head to the end of the application's answer",
        ("method", "route"),
        tuple(buckets),
    )


BACKEND_UP = Family(
    "socketify_state_backend_up",
    "gauge_min",
    "1 when every worker reaches its state backend (the Redis breaker is closed)",
)

WEBSOCKET_MESSAGES = Family(
    "socketify_websocket_messages_total",
    "counter",
    "Pulse WebSocket messages (text and binary), by direction: in (received) or out (sent)",
    ("direction",),
)

DB_POOL_IN_USE = Family(
    "socketify_db_pool_in_use",
    "gauge",
    "Database connections checked out of the workers' pools",
)
DB_POOL_WAITS = Family(
    "socketify_db_pool_waits_total",
    "counter",
    "Times a request found every pooled database connection busy and had to wait",
)
