"""`TallyTable`: per-worker regions summed by the master, kept across a worker's end."""

from __future__ import annotations

import os

import pytest

from workers.shared.tally import Kind, TallyFull, TallyTable


def values(table: TallyTable, key: bytes) -> tuple[float, ...] | None:
    found = table.collect().entries.get(key)
    return None if found is None else found[1]


def test_cells_of_the_same_key_are_summed_over_regions() -> None:
    table = TallyTable(capacity=4)
    first, second = table.writer(0), table.writer(3)
    first.cells[first.entry(b"hits", Kind.COUNTER)] += 2
    second.cells[second.entry(b"hits", Kind.COUNTER)] += 5
    assert values(table, b"hits") == (7.0,)


def test_a_forked_writer_is_seen_by_the_parent() -> None:
    table = TallyTable(capacity=2)
    pid = os.fork()
    if pid == 0:
        writer = table.writer(1)
        at = writer.entry(b"hist", Kind.COUNTER, 3)
        writer.cells[at + 1] += 4
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    assert values(table, b"hist") == (0.0, 4.0, 0.0)


def test_retiring_a_region_keeps_counters_and_forgets_gauges() -> None:
    table = TallyTable(capacity=2)
    writer = table.writer(0)
    writer.cells[writer.entry(b"requests", Kind.COUNTER)] += 10
    writer.cells[writer.entry(b"in_flight", Kind.GAUGE)] += 3
    table.retire(0)
    assert values(table, b"requests") == (10.0,)
    assert values(table, b"in_flight") is None
    again = table.writer(0)  # the next worker on that record starts empty
    again.cells[again.entry(b"requests", Kind.COUNTER)] += 1
    assert values(table, b"requests") == (11.0,)


def test_gauge_min_is_the_lowest_live_value() -> None:
    table = TallyTable(capacity=3)
    for index, value in enumerate((1.0, 0.0, 1.0)):
        writer = table.writer(index)
        writer.cells[writer.entry(b"up", Kind.GAUGE_MIN)] = value
    assert values(table, b"up") == (0.0,)


def test_a_full_region_refuses_new_entries_and_keeps_the_old_ones() -> None:
    table = TallyTable(capacity=1, directory_bytes=64, cells=4)
    writer = table.writer(0)
    writer.cells[writer.entry(b"a", Kind.COUNTER, 4)] += 1
    with pytest.raises(TallyFull):
        writer.entry(b"b", Kind.COUNTER)
    assert writer.entry(b"a", Kind.COUNTER, 4) == 0
    assert values(table, b"a") == (1.0, 0.0, 0.0, 0.0)
