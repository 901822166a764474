"""Per-worker tallies of named numbers in shared memory, summed by the master.

Theory of operation
-------------------
The master maps one ``TallyTable`` before it forks; each worker process writes only its own
*region* (the one at its heartbeat record's index), so no write ever needs a lock. A region
holds a directory of entries and an array of 8-byte float cells:

- an entry is a byte ``key`` the caller chooses (the metrics layer encodes a name and label
  values in it), a ``Kind`` and a run of ``size`` cells. Entries are appended, never changed:
  the worker writes the entry's bytes first and publishes it by bumping the entry count last,
  so a reader (or a worker killed mid-append) never sees half an entry;
- a cell is one aligned double, written whole through a ``memoryview`` cast, so the master's
  reads see the old or the new value, never a torn one. Doubles count exactly up to 2**53.

``collect()`` (master) sums every region cell by cell per key. When a worker process has
ended, ``retire()`` folds what it counted (``Kind.COUNTER`` entries) into the master's own
totals and empties the region for the next worker, so counters never go backwards across a
crash, a recycle or a reload; gauges are a live worker's view and leave with it. A lock in
the master makes ``retire`` and ``collect`` atomic with respect to each other (workers never
take it).

``multiprocessing.shared_memory`` is deliberately not used: its resource tracker deadlocks
under gevent.
"""

from __future__ import annotations

import mmap
import struct
import threading
from dataclasses import dataclass
from enum import IntEnum

__all__ = ["Kind", "TallyFull", "TallyTable", "TallyWriter", "Totals"]

_WORD = struct.Struct("=Q")
_ENTRY = struct.Struct("=HBxII")  # key length, kind, cell offset, cell count; then the key
_COUNT, _DIRECTORY_USED, _CELLS_USED = 0, 8, 16  # byte offsets of the region's header words
_HEADER = 64


class Kind(IntEnum):
    """How the master combines an entry across workers, and whether it outlives one."""

    COUNTER = 0  # summed; kept after the worker ends (histogram buckets are counters too)
    GAUGE = 1  # summed over live workers
    GAUGE_MIN = 2  # the lowest value among live workers ("is it up everywhere")
    INFO = 3  # no cells: the key alone is the information (a metric's description)


class TallyFull(Exception):
    """This worker's region has no room for another entry."""


@dataclass(frozen=True)
class Totals:
    """What ``collect()`` returns: per key, its kind and the combined cells."""

    entries: dict[bytes, tuple[Kind, tuple[float, ...]]]


class TallyTable:
    """Regions of named float cells, one per worker record, in memory shared across fork."""

    def __init__(
        self, capacity: int = 256, directory_bytes: int = 1 << 17, cells: int = 1 << 14
    ) -> None:
        self.capacity = capacity
        self.directory_bytes = directory_bytes
        self.cells = cells
        self.region_bytes = _HEADER + directory_bytes + 8 * cells
        # Anonymous + MAP_SHARED: survives fork; pages cost memory only once written.
        self._mem = mmap.mmap(-1, capacity * self.region_bytes)
        self._lock = threading.Lock()  # master only: retire() against collect()
        self._retired: dict[bytes, tuple[Kind, list[float]]] = {}
        # Master-side cache of each region's parsed directory: (entries parsed, their list).
        self._parsed: dict[int, list[tuple[bytes, Kind, int, int]]] = {}

    # -- worker side -------------------------------------------------------------------------

    def writer(self, index: int) -> TallyWriter:
        """The writer of region ``index`` (call it in the worker that owns the record)."""
        if not 0 <= index < self.capacity:
            raise IndexError(f"no tally region {index} (capacity {self.capacity})")
        return TallyWriter(self, index)

    def region_view(self, index: int) -> memoryview:
        """The raw bytes of region ``index`` (for ``TallyWriter``)."""
        start = index * self.region_bytes
        return memoryview(self._mem)[start : start + self.region_bytes]

    # -- master side -------------------------------------------------------------------------

    def collect(self) -> Totals:
        """Every key's cells summed over the live regions and what ended workers counted."""
        with self._lock:
            combined: dict[bytes, tuple[Kind, list[float]]] = {
                key: (kind, list(values)) for key, (kind, values) in self._retired.items()
            }
            for index in range(self.capacity):
                for key, kind, values in self._read_region(index):
                    _combine(combined, key, kind, values)
        return Totals({key: (kind, tuple(values)) for key, (kind, values) in combined.items()})

    def retire(self, index: int) -> None:
        """Fold an ended worker's counters into the master's totals and empty its region."""
        with self._lock:
            for key, kind, values in self._read_region(index):
                if kind in (Kind.COUNTER, Kind.INFO):
                    _combine(self._retired, key, kind, values)
            view = self.region_view(index)
            used = _WORD.unpack_from(view, _CELLS_USED)[0]
            cells_start = _HEADER + self.directory_bytes
            view[cells_start : cells_start + 8 * used] = bytes(8 * used)
            view[:_HEADER] = bytes(_HEADER)
            view.release()
            self._parsed.pop(index, None)

    def close(self) -> None:
        """Unmap the table in this process."""
        self._mem.close()

    def _read_region(self, index: int) -> list[tuple[bytes, Kind, list[float]]]:
        view = self.region_view(index)
        try:
            count = _WORD.unpack_from(view, _COUNT)[0]
            if not count:
                return []
            parsed = self._parsed.setdefault(index, [])
            offset = _HEADER + sum(_ENTRY.size + len(key) for key, *_ in parsed)
            while len(parsed) < count:
                size, kind, first, cells = _ENTRY.unpack_from(view, offset)
                start = offset + _ENTRY.size
                parsed.append((bytes(view[start : start + size]), Kind(kind), first, cells))
                offset = start + size
            cells_view = view[_HEADER + self.directory_bytes :].cast("d")
            out = [
                (key, kind, list(cells_view[first : first + cells]))
                for key, kind, first, cells in parsed[:count]
            ]
            cells_view.release()
            return out
        finally:
            view.release()


class TallyWriter:
    """One worker's region: register entries once, then add to their cells directly.

    ``cells`` is a ``memoryview`` of doubles: ``writer.cells[i] += 1`` is the whole cost of a
    count, which is what keeps per-request metrics cheap.
    """

    def __init__(self, table: TallyTable, index: int) -> None:
        self._view = table.region_view(index)
        self._directory_end = _HEADER + table.directory_bytes
        self._capacity = table.cells
        self.cells = self._view[self._directory_end :].cast("d")
        self._known: dict[bytes, int] = {}

    def entry(self, key: bytes, kind: Kind, size: int = 1) -> int:
        """The first cell of entry ``key`` (appended on first use); ``TallyFull`` when full."""
        first = self._known.get(key)
        if first is not None:
            return first
        view = self._view
        count, used, cells_used = (_WORD.unpack_from(view, at)[0] for at in (0, 8, 16))
        offset = _HEADER + used
        if offset + _ENTRY.size + len(key) > self._directory_end or len(key) > 0xFFFF:
            raise TallyFull(f"no room for another tally entry ({count} entries)")
        if cells_used + size > self._capacity:
            raise TallyFull(f"no room for {size} more tally cells ({cells_used} used)")
        _ENTRY.pack_into(view, offset, len(key), kind, cells_used, size)
        start = offset + _ENTRY.size
        view[start : start + len(key)] = key
        _WORD.pack_into(view, _DIRECTORY_USED, used + _ENTRY.size + len(key))
        _WORD.pack_into(view, _CELLS_USED, cells_used + size)
        _WORD.pack_into(view, _COUNT, count + 1)  # publish last
        self._known[key] = cells_used
        return cells_used


def _combine(
    into: dict[bytes, tuple[Kind, list[float]]], key: bytes, kind: Kind, values: list[float]
) -> None:
    known = into.get(key)
    if known is None:
        into[key] = (kind, list(values))
        return
    total = known[1]
    if len(total) != len(values):
        return  # the same key with another shape: a caller bug; keep the first one
    if kind is Kind.GAUGE_MIN:
        total[:] = [min(a, b) for a, b in zip(total, values, strict=True)]
    else:
        total[:] = [a + b for a, b in zip(total, values, strict=True)]
