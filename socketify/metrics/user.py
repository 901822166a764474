"""Counters, gauges and histograms of the application, summed across workers like ours.

    orders = metrics.Counter("shop_orders_total", "Orders placed", labels=("kind",))
    orders.inc(kind="gift")                       # in any handler, on any worker

Declare them at module level; they record into the worker's region of the shared tally and the
master's `/metrics` shows the sum over all workers (and keeps what ended workers counted).
A gauge is summed too: each worker sets its own share (its open carts, its queue length).
"""

from __future__ import annotations

from collections.abc import Iterable

from socketify.metrics.families import Family
from socketify.metrics.recorder import MAX_BUCKETS, current

__all__ = ["Counter", "Gauge", "Histogram"]


class _Metric:
    """What the three kinds share: a `Family` and label values given as keywords."""

    type = ""

    def __init__(
        self,
        name: str,
        help: str,
        labels: Iterable[str] = (),
        buckets: Iterable[float] = (),
    ) -> None:
        self.family = Family(name, self.type, help, tuple(labels), tuple(buckets))

    def _values(self, labels: dict[str, object]) -> tuple[str, ...]:
        names = self.family.labels
        if len(labels) != len(names) or not all(name in labels for name in names):
            raise ValueError(f"{self.family.name} takes the labels {names}, got {tuple(labels)}")
        return tuple(str(labels[name]) for name in names)


class Counter(_Metric):
    """A count that only goes up: `inc(amount=1, **labels)`."""

    type = "counter"

    def inc(self, amount: float = 1.0, **labels: object) -> None:
        """Add `amount` (>= 0) to the series of `labels`."""
        if amount < 0:
            raise ValueError("a counter only goes up; use a Gauge")
        current().add(self.family, amount, self._values(labels))


class Gauge(_Metric):
    """A value that goes up and down; the master shows the sum of every live worker's."""

    type = "gauge"

    def set(self, value: float, **labels: object) -> None:
        """Set this worker's share of the series of `labels`."""
        current().set(self.family, value, self._values(labels))

    def inc(self, amount: float = 1.0, **labels: object) -> None:
        """Add `amount` to this worker's share."""
        current().add(self.family, amount, self._values(labels))

    def dec(self, amount: float = 1.0, **labels: object) -> None:
        """Subtract `amount` from this worker's share."""
        current().add(self.family, -amount, self._values(labels))


class Histogram(_Metric):
    """A distribution of observations (durations, sizes) in `buckets` (upper bounds)."""

    type = "histogram"

    def __init__(
        self,
        name: str,
        help: str,
        labels: Iterable[str] = (),
        buckets: Iterable[float] = (),
    ) -> None:
        super().__init__(name, help, labels, buckets)
        if len(self.family.buckets) > MAX_BUCKETS:
            raise ValueError(f"{name}: at most {MAX_BUCKETS} buckets")

    def observe(self, value: float, **labels: object) -> None:
        """Record one observation in the series of `labels`."""
        current().observe(self.family, value, self._values(labels))
