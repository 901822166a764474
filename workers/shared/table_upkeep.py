"""Work on the whole shared table: scans for a key prefix, and the sweep of expired entries.

Theory of operation
-------------------
Both walk the groups of every size class, skipping the groups that never held a key (their
used byte in the table's header is 0, so their pages are not even touched), and hold one
group's lock at a time. ``select`` and ``remove_where`` wait for each lock like any writer;
``sweep`` never waits: the master's state thread runs it, a few groups per turn, and a
worker may hold a lock across a round trip to that very thread. The sweep frees expired
slots ahead of the writes that would reclaim them, and turns the tags of slots that no
lookup needs to probe past back into never-used ones (0), so misses stay short: a slot is
needed while some live key of the group sits beyond it on its probe from its first slot.
A group left with no live key forgets it was used.
"""

from __future__ import annotations

from collections.abc import Callable

from workers.shared.table import SharedTable
from workers.shared.table_layout import GROUP_SLOTS, LAST, TOMB, Stored

__all__ = ["remove_where", "select", "sweep"]


def select(table: SharedTable, test: Callable[[Stored], bool]) -> list[Stored]:
    """Every entry (expired or not) for which ``test`` is true, each group under its lock."""
    return _visit(table, test, remove=False)


def remove_where(table: SharedTable, test: Callable[[Stored], bool]) -> list[Stored]:
    """Remove every entry for which ``test`` is true (under its group's lock); those."""
    return _visit(table, test, remove=True)


def _visit(table: SharedTable, test: Callable[[Stored], bool], remove: bool) -> list[Stored]:
    out: list[Stored] = []
    for size_class, layout in enumerate(table.classes):
        for group in range(layout.groups):
            if not table.mem[layout.used + group]:
                continue  # never held a key: do not even touch its pages
            seq_at = layout.seq_at(group)
            with table.group_lock(group):
                doomed = {}
                for index, stored in table.group_entries(size_class, seq_at):
                    if test(stored):
                        out.append(stored)
                        doomed[index] = TOMB
                if remove and doomed:
                    table.set_tags(seq_at, doomed)
    return out


def sweep(table: SharedTable, now: float, cursor: int, budget: int) -> int:
    """Free the expired entries of up to ``budget`` groups from ``cursor`` (a count over
    every class's groups), skipping groups whose lock is taken; returns the next cursor (0
    once every group was visited)."""
    total = sum(table.groups)
    end = min(total, cursor + budget)
    for number in range(cursor, end):
        size_class = 0
        group = number
        while group >= table.classes[size_class].groups:
            group -= table.classes[size_class].groups
            size_class += 1
        if not table.mem[table.classes[size_class].used + group]:
            continue
        lock = table.group_lock(group)
        if not lock.try_acquire():
            continue  # busy (maybe waiting on the master, which may be the caller)
        try:
            _compact(table, size_class, group, now)
        finally:
            lock.release()
    return 0 if end >= total else end


def _compact(table: SharedTable, size_class: int, group: int, now: float) -> None:
    """Free a group's expired slots and forget tombstones no probe needs (with its lock)."""
    layout = table.classes[size_class]
    seq_at = layout.seq_at(group)
    tags = table.words[seq_at + 2 : seq_at + 2 + GROUP_SLOTS].tolist()
    live = [
        (index, table.layout.first_slot(stored.key))
        for index, stored in table.group_entries(size_class, seq_at)
        if stored.expires > now
    ]
    needed = [False] * GROUP_SLOTS  # slots a live key's lookup passes on its way
    for index, first in live:
        position = first
        while position != index:
            needed[position] = True
            position = (position + 1) & LAST
    keep = {index for index, _ in live}
    changes = {}
    for index in range(GROUP_SLOTS):
        if index not in keep:
            wanted = TOMB if needed[index] else 0
            if tags[index] != wanted:
                changes[index] = wanted
    if changes:
        table.set_tags(seq_at, changes)
    if not live:
        table.mem[layout.used + group] = 0
