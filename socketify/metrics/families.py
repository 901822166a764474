"""Metric families and their series, as keys of the shared tally (no IO, no gevent).

A worker records into its region of ``workers.shared.tally`` under byte keys; the master, which
never imports the app, rebuilds every metric from those keys alone. So each family is written
once as a self-describing ``Kind.INFO`` entry (name, type, help, label names, buckets), and each
series as the family name plus its label values. Both are compact JSON.

A histogram series takes ``len(buckets) + 2`` cells: one per bucket upper bound (not
cumulative: a duration lands in exactly one), one for ``+Inf``, and the sum of observations.
Its count is the sum of the bucket cells, so count and buckets can never disagree.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import orjson

from workers.shared.tally import Kind

__all__ = [
    "DEFAULT_BUCKETS",
    "Family",
    "decode_family",
    "decode_series",
    "series_key",
]

# Seconds; prometheus_client's defaults, which suit web request latencies.
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = ("counter", "gauge", "gauge_min", "histogram")
_SERIES_PREFIX = b"s"
_FAMILY_PREFIX = b"f"


@dataclass(frozen=True)
class Family:
    """A metric's description: ``type`` is counter, gauge, gauge_min or histogram.

    ``gauge_min`` is a gauge combined across workers by its lowest value (1 only when every
    worker says 1), for "is the backend up"; plain gauges are summed.
    """

    name: str
    type: str
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"invalid metric name {self.name!r}")
        if self.type not in TYPES:
            raise ValueError(f"metric type must be one of {TYPES}, got {self.type!r}")
        for label in self.labels:
            if not _LABEL.fullmatch(label) or label.startswith("__") or label == "le":
                raise ValueError(f"invalid label name {label!r} for {self.name}")
        if self.type == "histogram":
            buckets = tuple(float(b) for b in self.buckets or DEFAULT_BUCKETS)
            if list(buckets) != sorted(set(buckets)) or not all(map(math.isfinite, buckets)):
                raise ValueError(f"{self.name}: buckets must be finite and increasing")
            object.__setattr__(self, "buckets", buckets)
        elif self.buckets:
            raise ValueError(f"{self.name}: only a histogram has buckets")

    @property
    def kind(self) -> Kind:
        """How the master combines this family's cells across workers."""
        if self.type == "gauge":
            return Kind.GAUGE
        if self.type == "gauge_min":
            return Kind.GAUGE_MIN
        return Kind.COUNTER

    @property
    def cells(self) -> int:
        """Cells per series."""
        return len(self.buckets) + 2 if self.type == "histogram" else 1

    @property
    def key(self) -> bytes:
        """The ``Kind.INFO`` entry that describes this family to the master."""
        fields = [self.name, self.type, self.help, list(self.labels), list(self.buckets)]
        return _FAMILY_PREFIX + orjson.dumps(fields)


def series_key(name: str, values: tuple[str, ...]) -> bytes:
    """The tally key of one series: the family name and its label values, in order."""
    return _SERIES_PREFIX + orjson.dumps([name, *values])


def decode_family(key: bytes) -> Family | None:
    """The family a ``Family.key`` describes; None for a key that is not one."""
    if not key.startswith(_FAMILY_PREFIX):
        return None
    try:
        name, type_, help_, labels, buckets = orjson.loads(key[1:])
        return Family(name, type_, help_, tuple(labels), tuple(buckets))
    except (ValueError, TypeError):  # not written by `Family.key`: not ours to show
        return None


def decode_series(key: bytes) -> tuple[str, tuple[str, ...]] | None:
    """``(family name, label values)`` of a ``series_key``; None for a key that is not one."""
    if not key.startswith(_SERIES_PREFIX):
        return None
    try:
        name, *values = orjson.loads(key[1:])
    except (ValueError, TypeError):
        return None
    return str(name), tuple(str(value) for value in values)
