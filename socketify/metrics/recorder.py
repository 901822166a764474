"""`Recorder`: this process's pen for metrics, writing into its region of the shared tally.

A worker of the pre-fork master installs the recorder of its own region at boot
(`install`); the master sums every region for `/metrics`. Anywhere else (`workers=0`, a
`TestClient`, a script) `current()` hands out a recorder over a private table, so recording
always works and simply is not exported.

Looking up a series' cells costs one dict lookup once the series exists; registering it writes
its key into the region once. A full region drops new series (their counts go to a scratch
area nobody reads) and says so once in the log, rather than failing requests.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Callable

from socketify.metrics.families import Family, series_key
from workers.shared.tally import Kind, TallyFull, TallyTable, TallyWriter

__all__ = ["MAX_BUCKETS", "Recorder", "count_one", "counter", "current", "install"]

log = logging.getLogger("socketify.metrics")

MAX_BUCKETS = 254  # a histogram series must fit the scratch area below
_SCRATCH = b"-scratch"  # neither a family nor a series key: the master never shows it


class Recorder:
    """Writes series of `Family`s into one tally region; `cells[i] += x` records."""

    def __init__(self, writer: TallyWriter) -> None:
        self._writer = writer
        self.cells = writer.cells
        self._declared: set[str] = set()
        self._series: dict[tuple[str, tuple[str, ...]], int] = {}
        self._scratch = writer.entry(_SCRATCH, Kind.GAUGE, MAX_BUCKETS + 2)
        self._warned = False

    def cell(self, family: Family, values: tuple[str, ...] = ()) -> int:
        """The first cell of the series of `family` with label `values` (created on first use)."""
        found = self._series.get((family.name, values))
        if found is not None:
            return found
        return self._register(family, values)

    def add(self, family: Family, amount: float, values: tuple[str, ...] = ()) -> None:
        """Add `amount` to a counter or gauge series."""
        self.cells[self.cell(family, values)] += amount

    def set(self, family: Family, value: float, values: tuple[str, ...] = ()) -> None:
        """Set a gauge series to `value` (this worker's share of it)."""
        self.cells[self.cell(family, values)] = value

    def observe(self, family: Family, value: float, values: tuple[str, ...] = ()) -> None:
        """Record one observation in a histogram series."""
        first = self.cell(family, values)
        buckets = family.buckets
        cells = self.cells
        cells[first + bisect_left(buckets, value)] += 1
        cells[first + len(buckets) + 1] += value

    def _register(self, family: Family, values: tuple[str, ...]) -> int:
        writer = self._writer
        try:
            if family.name not in self._declared:
                writer.entry(family.key, Kind.INFO, 0)
                self._declared.add(family.name)
            first = writer.entry(series_key(family.name, values), family.kind, family.cells)
        except TallyFull as exc:
            if not self._warned:
                self._warned = True
                log.error("metrics: %s; new series of this worker are dropped", exc)
            return self._scratch
        self._series[(family.name, values)] = first
        return first


class _Installed:
    """The worker's recorder (set at boot), and the private one made on first use elsewhere."""

    __slots__ = ("local", "worker")

    def __init__(self) -> None:
        self.worker: Recorder | None = None
        self.local: Recorder | None = None


_installed = _Installed()


def install(recorder: Recorder | None) -> None:
    """Make `recorder` this process's (a worker does this at boot); None forgets it."""
    _installed.worker = recorder


def current() -> Recorder:
    """This process's recorder: its worker region's, or a private one outside a master."""
    recorder = _installed.worker or _installed.local
    if recorder is None:
        recorder = _installed.local = Recorder(TallyTable(capacity=1).writer(0))
    return recorder


def count_one(family: Family, values: tuple[str, ...] = ()) -> None:
    """Add 1 to a series when this process exports metrics (for paths that are already slow)."""
    recorder = _installed.worker
    if recorder is not None:
        recorder.add(family, 1, values)


def counter(family: Family, values: tuple[str, ...] = ()) -> Callable[[], None] | None:
    """A function that adds 1 to one series, or None when this process exports no metrics.

    For counting hooks in hot paths: the caller keeps the function and tests it for None, so
    with metrics off a count costs one comparison.
    """
    recorder = _installed.worker
    if recorder is None:
        return None
    cells = recorder.cells
    at = recorder.cell(family, values)

    def count() -> None:
        cells[at] += 1

    return count
