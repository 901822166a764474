"""The master's `/metrics`: the shared tally, the supervisor's own numbers and process metrics,
rendered in the Prometheus text format by `prometheus_client`.

Runs in the master only (it imports `prometheus_client`, the `metrics` extra). Every scrape
reads the tally afresh (`TallyTable.collect`), so what it shows is exact at that instant.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

from socketify.metrics.families import Family, decode_family, decode_series
from workers.shared.tally import TallyTable, Totals
from workers.supervise.status import ExitReason, MasterStatus

__all__ = ["CONTENT_TYPE", "Exposition"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Exposition:
    """Renders everything the master knows as one Prometheus text page."""

    def __init__(self, table: TallyTable) -> None:
        self._table = table

    def render(self, status: MasterStatus, restarts: Mapping[ExitReason, int]) -> bytes:
        """The `/metrics` body for this instant."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Snapshot(self._table.collect(), status, restarts))
        return bytes(generate_latest(registry))


class _Snapshot:
    """A `prometheus_client` collector over one scrape's numbers."""

    def __init__(
        self, totals: Totals, status: MasterStatus, restarts: Mapping[ExitReason, int]
    ) -> None:
        self.totals = totals
        self.status = status
        self.restarts = restarts

    def collect(self) -> Iterator[Metric]:
        yield from tally_families(self.totals)
        workers = GaugeMetricFamily("socketify_workers", "Worker processes accepting connections")
        workers.add_metric([], self.status.accepting)
        yield workers
        restarts = CounterMetricFamily(
            "socketify_worker_restarts",
            "Workers that ended while the master kept serving, by reason",
            labels=["reason"],
        )
        for reason in ExitReason:
            restarts.add_metric([reason.value], self.restarts.get(reason, 0))
        yield restarts
        yield from process_families(self.status)


def tally_families(totals: Totals) -> Iterator[Metric]:
    """The metrics the workers recorded, rebuilt from the tally's self-describing keys."""
    described: dict[str, Family] = {}
    series: dict[str, list[tuple[tuple[str, ...], tuple[float, ...]]]] = {}
    for key, (_kind, values) in totals.entries.items():
        family = decode_family(key)
        if family is not None:
            described.setdefault(family.name, family)
            continue
        found = decode_series(key)
        if found is not None:
            series.setdefault(found[0], []).append((found[1], values))
    for name, family in sorted(described.items()):
        yield _metric(family, sorted(series.get(name, ())))


def _metric(family: Family, series: list[tuple[tuple[str, ...], tuple[float, ...]]]) -> Metric:
    labels = list(family.labels)
    if family.type == "counter":
        counter = CounterMetricFamily(family.name, family.help, labels=labels)
        for values, cells in series:
            counter.add_metric(list(values), cells[0])
        return counter
    if family.type != "histogram":
        gauge = GaugeMetricFamily(family.name, family.help, labels=labels)
        for values, cells in series:
            gauge.add_metric(list(values), cells[0])
        return gauge
    histogram = HistogramMetricFamily(family.name, family.help, labels=labels)
    bounds = (*family.buckets, math.inf)
    for values, cells in series:
        if len(cells) != len(bounds) + 1:
            continue  # recorded with other buckets (a reload changed them): not comparable
        running = 0.0
        buckets = []
        for bound, count in zip(bounds, cells, strict=False):
            running += count
            buckets.append((floatToGoString(bound), running))
        histogram.add_metric(list(values), buckets, sum_value=cells[-1])
    return histogram


def process_families(status: MasterStatus) -> Iterator[Metric]:
    """CPU, memory, file descriptors... of the master and of each worker (`worker` label)."""
    processes = [("master", os.getpid())]
    processes += [(str(w.slot), w.pid) for w in sorted(status.workers, key=lambda w: w.slot)]
    merged: dict[str, Metric] = {}
    for worker, pid in processes:
        collector = ProcessCollector(registry=None, pid=functools.partial(int, pid))
        for family in collector.collect():
            metric = merged.get(family.name)
            if metric is None:
                metric = merged[family.name] = Metric(
                    family.name, family.documentation, family.type
                )
            for sample in family.samples:
                labels = {**sample.labels, "worker": worker, "pid": str(pid)}
                metric.add_sample(sample.name, labels, sample.value)
    yield from merged.values()
