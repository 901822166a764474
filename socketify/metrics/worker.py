"""What `--metrics-bind` sets up: the shared tally before fork, then each worker's recorder."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from socketify.metrics.builtin import duration_family
from socketify.metrics.families import DEFAULT_BUCKETS
from socketify.metrics.recorder import Recorder, install
from socketify.metrics.request_metrics import RequestMetrics
from workers.shared.tally import TallyTable

__all__ = ["WorkerMetrics", "parse_buckets"]


@dataclass(frozen=True)
class WorkerMetrics:
    """The tally every worker writes into, and the request duration buckets.

    Made by the master before it forks (`create`); each worker calls `start` at boot.
    """

    table: TallyTable
    buckets: tuple[float, ...] = DEFAULT_BUCKETS

    @classmethod
    def create(cls, capacity: int, buckets: Iterable[float] | None = None) -> WorkerMetrics:
        """A tally with one region per worker record; checks the buckets."""
        bounds = tuple(buckets) if buckets else DEFAULT_BUCKETS
        duration_family(bounds)  # ValueError now, not in every worker
        return cls(TallyTable(capacity=capacity), bounds)

    def start(self, app: Any, record: int) -> Recorder:
        """In a worker: record into region `record`; count `app`'s requests if it is HTTP."""
        from socketify.core.application import Application

        recorder = Recorder(self.table.writer(record))
        install(recorder)
        http = getattr(app, "http", app)  # a tcp.Bundle's HTTP part
        if isinstance(http, Application):
            http.instrument(RequestMetrics(recorder, self.buckets))
        return recorder


def parse_buckets(text: str) -> tuple[float, ...]:
    """`--metrics-buckets 0.01,0.1,1`: increasing bounds in seconds; ValueError if not."""
    bounds = tuple(float(part) for part in text.split(",") if part.strip())
    return duration_family(bounds).buckets
