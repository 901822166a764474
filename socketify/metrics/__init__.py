"""Prometheus metrics summed across workers, health and readiness (`--metrics-bind`).

Workers record into shared memory (`workers.shared.tally`); the master serves `/metrics`,
`/healthz` and `/readyz` on its own port. The application's own metrics:

    from socketify import metrics

    orders = metrics.Counter("shop_orders_total", "Orders placed", labels=("kind",))
    orders.inc(kind="gift")
"""

from __future__ import annotations

from socketify.metrics.families import DEFAULT_BUCKETS
from socketify.metrics.user import Counter, Gauge, Histogram

__all__ = ["DEFAULT_BUCKETS", "Counter", "Gauge", "Histogram"]
