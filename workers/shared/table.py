"""A hash table in shared memory that every worker reads and updates itself.

Theory of operation
-------------------
The master makes one ``SharedTable`` before the first fork (a memfd mapped ``MAP_SHARED``), so
every worker, and every worker respawned later, maps the same pages (``workers.shared.table_layout``
says where everything is). A key has one group of ``GROUP_SLOTS`` slots in each of three
size classes (240, 1 088 and 4 352 bytes of key and value) and lives in at most one slot of
the whole table: its group's *first* slot or after it (probing wraps inside the group and
stops at a never-used slot). A new entry goes to the smallest class it fits, in a free,
removed or expired slot of its group; else to such a slot of its group in a larger class;
else the entry of those groups written longest ago makes room, once the caller has kept it
elsewhere (``put``'s ``move``); else ``put`` says so. A live entry is never dropped here:
groups fill unevenly (a few of thousands fill up while the table is mostly empty), so
evicting from a full group would drop live sessions long before the store is full. The
caller moves them to the master's store instead (``workers.shared.table_store``): the table
is the fast tier for what was written lately, its memory is fixed, and the master's store
behind it evicts only when it is full itself.

Writers take the key's lock, ``with table.locked(place):``: a robust process-shared mutex
(``workers.shared.mutex``) that all the key's groups share. ``rewrite`` does the usual write
(the key in its first slot) in one step under it.

Readers take no lock. Each group has a sequence word that a writer makes odd before it
touches the group and even after; ``read`` reads the sequence word of the key's group in
one class, looks there, and reads it again: a change (or an odd value) means "read again",
and after ``READ_TRIES`` the reader takes the lock. It looks in the classes smallest first,
and an entry only ever moves to a larger class (a value that shrinks keeps its slot), its
new slot tagged before the old one is freed: so a key that is there throughout is found.
That needs loads to stay in program order and stores too, which x86-64 guarantees;
elsewhere ``read`` always takes the lock.

A writer killed while holding the lock must leave the table readable. Each slot therefore
has two *halves* and a control word saying which half is current: a write fills the other
half, then flips the word with one aligned 8-byte store, and a new key becomes visible when
its tag (its hash, always odd) is stored, last. A write cut short leaves the previous
version, never a torn one. Whoever next takes the lock gets ``EOWNERDEAD`` and runs
``owner_died``: it makes the sequence words even again, keeps only the copy in the smaller
class of a key that was being moved (both are whole), and frees a slot that was being given
to a new key (its new half under the old key's tag). A removed key leaves a tombstone tag
so that probing goes on past it.

Expired entries are reclaimed by the writes that need their slots, and ahead of time by the
sweep of ``workers.shared.table_upkeep`` (with the scans of the whole table).

This module knows slots, locks and eviction, not store semantics (``workers.shared.table_store``
has those): ``kind`` is opaque here, and an entry "has an expiry" when ``expires`` is finite.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import mmap
import os
import platform
import time
from collections.abc import Callable, Sequence
from typing import Any

from workers.shared.mutex import MUTEX_BYTES, SharedMutex, make_mutexes, trylock, unlock
from workers.shared.table_layout import (
    DEFAULT_GROUPS,
    GROUP_HEAD,
    GROUP_SLOTS,
    HALF_HEAD,
    KEY_AT,
    LAST,
    MAX_KEY,
    MUTEXES_AT,
    SLOT_DATA,
    TAG_MASK,
    TOMB,
    Entry,
    Layout,
    Place,
    Stored,
    groups_for,
)

__all__ = [
    "DEFAULT_GROUPS",
    "GROUP_SLOTS",
    "MAX_KEY",
    "SLOT_DATA",
    "Entry",
    "Place",
    "SharedTable",
    "Stored",
    "groups_for",
]

DEFAULT_STRIPES = 32
_NO_EXPIRY_LAST = 1e15  # added to the write time of an entry without an expiry, in ``_new_slot``
READ_TRIES = 8  # lock-free read attempts before a reader takes the lock
LOCK_FREE_READS = platform.machine() in ("x86_64", "AMD64")  # loads and stores stay ordered

# PERF: ``_entry(Entry, (...))`` builds one in a single C call (NamedTuple's ``__new__`` is
# Python code), once per read.
_entry: Any = tuple.__new__


class SharedTable:
    """Size classes of double-buffered slots in memory shared across ``fork()`` (module doc)."""

    def __init__(
        self, groups: Sequence[int] = DEFAULT_GROUPS, stripes: int = DEFAULT_STRIPES
    ) -> None:
        self.layout = layout = Layout(groups, stripes)
        self.classes = layout.classes
        self.stripes = layout.stripes
        self.size = layout.size
        self._sizes = tuple((c.slot, c.half) for c in self.classes)  # for the lookups' sake
        self._halves = tuple(c.half for c in self.classes)
        self._memfd = os.memfd_create("socketify-table", os.MFD_CLOEXEC)
        os.ftruncate(self._memfd, self.size)
        self.mem = mmap.mmap(self._memfd, self.size)
        self.words = memoryview(self.mem).cast("Q")
        # How a waiter sleeps: a worker's ``workers.shared.link.Link`` makes this gevent's sleep, so
        # the other greenlets (maybe the one holding the lock) run meanwhile.
        self.pause: Callable[[float], None] = time.sleep
        base = ctypes.addressof(ctypes.c_char.from_buffer(self.mem))
        addresses = [base + MUTEXES_AT + n * MUTEX_BYTES for n in range(self.stripes)]
        self._stripes = make_mutexes(self, addresses)

    @property
    def groups(self) -> tuple[int, ...]:
        """The group count of each size class."""
        return tuple(size_class.groups for size_class in self.classes)

    def place(self, key: bytes) -> Place:
        """Where ``key`` goes (its groups and lock), for the caller to keep and pass back."""
        return self.layout.place(key)

    def locked(self, place: Place) -> SharedMutex:
        """The lock of ``place``'s groups: ``with table.locked(place): ...`` (cooperative
        waits; ``workers.shared.mutex.LockTimeout`` when its holder is stuck)."""
        return self._stripes[place.stripe]

    # -- reading ---------------------------------------------------------------------------

    def read(self, place: Place) -> Entry | None:
        """The entry of ``place``'s key (expired or not) or None, lock-free (module doc)."""
        words = self.words
        tag = place.tag
        first = place.first
        if LOCK_FREE_READS:
            # PERF: the usual cases in one pass without a call per class (a third of a read's
            # cost): the key in the first slot of one of its groups, or never-used ones.
            size_class = 0
            for seq_at in place.seqs:
                seq = words[seq_at]
                found = words[seq_at + 2 + first]
                if found == tag:
                    home = place.homes[size_class]
                    half = home + 8 + words[home >> 3] * self._halves[size_class]
                    mem = self.mem
                    expires, kind, key_len, value_len, _, key = place.head.unpack_from(mem, half)
                    start = half + KEY_AT + key_len
                    value = mem[start : start + value_len]
                    same = key == place.key and key_len == len(key)
                    if same and not seq & 1 and words[seq_at] == seq:
                        entry: Entry = _entry(Entry, (size_class, first, kind, expires, value))
                        return entry
                    break  # changed meanwhile, or another key there: look the long way
                if found:
                    break  # the key may be further on in this group
                size_class += 1  # noqa: SIM113 - one load says the key is not in this class
            else:
                return None
            for _ in range(READ_TRIES):  # the long way: each group probed, its seq checked
                for size_class, seq_at in enumerate(place.seqs):
                    seq = words[seq_at]
                    if not words[seq_at + 2 + first]:
                        continue
                    probed = self._probe(place, size_class, seq_at)
                    if seq & 1 or words[seq_at] != seq:
                        break
                    if probed is not None:
                        return probed
                else:
                    return None
        with self.locked(place):
            return self.find(place)

    def find(self, place: Place) -> Entry | None:
        """The entry of ``place``'s key (expired or not) or None (with the lock)."""
        words = self.words
        tag = place.tag
        first = place.first
        for size_class, seq_at in enumerate(place.seqs):
            found = words[seq_at + 2 + first]
            if found == tag:  # PERF: the usual case, the key in its first slot, without a call
                home = place.homes[size_class]
                half = home + 8 + words[home >> 3] * self._halves[size_class]
                mem = self.mem
                expires, kind, key_len, value_len, _, key = place.head.unpack_from(mem, half)
                if key == place.key and key_len == len(key):
                    start = half + KEY_AT + key_len
                    value = mem[start : start + value_len]
                    entry: Entry = _entry(Entry, (size_class, first, kind, expires, value))
                    return entry
            if found:  # else never used: the key is not in this class
                probed = self._probe(place, size_class, seq_at)
                if probed is not None:
                    return probed
        return None

    def _probe(self, place: Place, size_class: int, seq_at: int) -> Entry | None:
        """The key's entry in its group of one class, or None."""
        words = self.words
        tag = place.tag
        index = place.first
        slot_bytes, half_bytes = self._sizes[size_class]
        for _ in range(GROUP_SLOTS):
            found = words[seq_at + 2 + index]
            if found == tag:
                slot = (seq_at << 3) + GROUP_HEAD + index * slot_bytes
                half = slot + 8 + words[slot >> 3] * half_bytes
                mem = self.mem
                expires, kind, key_len, value_len, _, key = place.head.unpack_from(mem, half)
                if key == place.key and key_len == len(key):
                    start = half + KEY_AT + key_len
                    value = mem[start : start + value_len]
                    entry: Entry = _entry(Entry, (size_class, index, kind, expires, value))
                    return entry
            elif not found:
                return None  # probing stops at a never-used slot
            index = (index + 1) & LAST
        return None

    # -- writing (with the lock) -----------------------------------------------------------

    def put(
        self,
        place: Place,
        found: Entry | None,
        kind: int,
        expires: float,
        value: bytes,
        now: float,
        move: Callable[[bytes, Entry], bool] | None = None,
        movable: frozenset[int] = frozenset(),
    ) -> bool:
        """Store the key's entry: where ``found`` (the key's entry, from ``find``) is if it
        fits there, else in a new slot, removing ``found``.

        When every slot it fits is live, the entry of a kind in ``movable`` written longest
        ago (one with an expiry first) makes room: ``move(key, entry)`` keeps it elsewhere
        and says whether it may go. False when no class has room: the table is unchanged and
        the caller keeps the entry elsewhere. ``now`` is the caller's clock (expiry and age).
        """
        key = place.key
        size = len(key) + len(value)
        if found is not None and size <= SLOT_DATA[found.size_class]:
            # PERF: the usual case, a new version where the key is, without a call.
            size_class = found.size_class
            words = self.words
            seq_at = place.seqs[size_class]
            if found.slot == place.first:
                slot = place.homes[size_class]
            else:
                slot = (seq_at << 3) + GROUP_HEAD + found.slot * self._sizes[size_class][0]
            current = words[slot >> 3]
            half = slot + 8 + (current ^ 1) * self._halves[size_class]
            mem = self.mem
            words[seq_at] += 1  # odd: readers of this group read again
            try:
                place.head.pack_into(mem, half, expires, kind, len(key), len(value), now, key)
                start = half + KEY_AT + len(key)
                mem[start : start + len(value)] = value
                words[slot >> 3] = current ^ 1  # commit: one aligned store
            finally:
                words[seq_at] += 1
            return True
        if len(key) > MAX_KEY:
            return False
        target = self._new_slot(place, size, now, movable if move is not None else frozenset())
        if target is None:
            return False
        size_class, index, taken = target
        words = self.words
        seq_at = place.seqs[size_class]
        if taken and (move is None or not move(*self._entry_at(size_class, seq_at, index))):
            return False
        moved_from = place.seqs[found.size_class] if found is not None else -1
        words[seq_at] += 1  # odd: readers of these groups read again
        if moved_from >= 0:
            words[moved_from] += 1
        try:
            self._fill(seq_at, size_class, index, place, kind, expires, value, now)
            words[seq_at + 2 + index] = place.tag  # the key appears (a moved one goes) only now...
            self.mem[
                self.classes[size_class].used + self.layout.group_number(size_class, seq_at)
            ] = 1
            if found is not None:
                words[moved_from + 2 + found.slot] = TOMB  # ...and only then leaves
        finally:
            if moved_from >= 0:
                words[moved_from] += 1
            words[seq_at] += 1
        return True

    def rewrite(
        self,
        place: Place,
        kind: int,
        expires: float,
        value: bytes,
        now: float,
        expected: bytes | None = None,
    ) -> bool | None:
        """The usual write in one step under the key's lock: a new version of an entry in
        its first slot that still fits there; with ``expected``, only over an entry of the
        same ``kind``, unexpired at ``now``, that holds ``expected``.

        True when written; False when it holds another value; None when this cannot decide
        (elsewhere, absent, too big, another kind, expired): then ``find`` and ``put``.
        PERF: half the cost of ``locked``, ``find`` and ``put``, and a shorter hold of the
        lock, which matters when two workers write one key.
        """
        stripe = self._stripes[place.stripe]
        failed = trylock(stripe.pointer)
        if failed:
            stripe.wait(failed)
        try:
            words = self.words
            tag = place.tag
            first = place.first
            seqs = place.seqs
            for size_class in range(len(seqs)):
                seq_at = seqs[size_class]
                found = words[seq_at + 2 + first]
                if found == tag:
                    break
                if found:
                    return None  # the key may be further on in this group
            else:
                return None
            key = place.key
            if len(key) + len(value) > SLOT_DATA[size_class]:
                return None
            home = place.homes[size_class]
            current = words[home >> 3]
            half_bytes = self._halves[size_class]
            half = home + 8 + current * half_bytes
            mem = self.mem
            old_expires, old_kind, key_len, value_len, _, stored = place.head.unpack_from(mem, half)
            if stored != key or key_len != len(key):
                return None
            if expected is not None:
                if old_kind != kind or old_expires <= now:
                    return None
                start = half + KEY_AT + key_len
                if mem[start : start + value_len] != expected:
                    return False
            half = home + 8 + (current ^ 1) * half_bytes
            words[seq_at] += 1  # odd: readers of this group read again
            try:
                place.head.pack_into(mem, half, expires, kind, key_len, len(value), now, key)
                start = half + KEY_AT + key_len
                mem[start : start + len(value)] = value
                words[home >> 3] = current ^ 1  # commit: one aligned store
            finally:
                words[seq_at] += 1
            return True
        finally:
            unlock(stripe.pointer)

    def remove(self, place: Place, entry: Entry) -> None:
        """Remove ``entry`` (the key's, from ``find``); a tombstone keeps later probes going."""
        self.set_tags(place.seqs[entry.size_class], {entry.slot: TOMB})

    def _fill(
        self,
        seq_at: int,
        size_class: int,
        index: int,
        place: Place,
        kind: int,
        expires: float,
        value: bytes,
        now: float,
    ) -> None:
        """Write the spare half of a slot and make it current (its group already odd)."""
        slot_bytes, half_bytes = self._sizes[size_class]
        words = self.words
        slot = (seq_at << 3) + GROUP_HEAD + index * slot_bytes
        current = words[slot >> 3]
        half = slot + 8 + (current ^ 1) * half_bytes
        key = place.key
        place.head.pack_into(self.mem, half, expires, kind, len(key), len(value), now, key)
        start = half + KEY_AT + len(key)
        self.mem[start : start + len(value)] = value
        words[slot >> 3] = current ^ 1  # commit: one aligned store

    def _new_slot(
        self, place: Place, size: int, now: float, movable: frozenset[int]
    ) -> tuple[int, int, bool] | None:
        """``(class, slot, taken)`` for a new entry of ``size`` bytes: a free, removed or
        expired slot of its group in the smallest class it fits, else in the next class
        (``taken`` False); else the slot of the live entry of a kind in ``movable`` written
        longest ago, one with an expiry before any without (``taken`` True); else None."""
        words = self.words
        mem = self.mem
        first = place.first
        unpack = HALF_HEAD.unpack_from
        never = math.inf
        oldest = never  # the rank of the slot that makes room: when it was written...
        room: tuple[int, int, bool] | None = None
        for size_class, layout in enumerate(self.classes):
            if layout.data < size:
                continue
            seq_at = place.seqs[size_class]
            tags = seq_at + 2
            group_at = (seq_at << 3) + GROUP_HEAD
            slot_bytes, half_bytes = layout.slot, layout.half
            for step in range(GROUP_SLOTS):
                index = (first + step) & LAST
                if not words[tags + index] & 1:
                    return size_class, index, False
                slot = group_at + index * slot_bytes
                expires, kind, _, _, written = unpack(mem, slot + 8 + words[slot >> 3] * half_bytes)
                if expires <= now:
                    return size_class, index, False
                if kind in movable:
                    # ...after every entry with an expiry, if it has none (the clock is seconds).
                    rank = written if expires != never else written + _NO_EXPIRY_LAST
                    if rank < oldest:
                        oldest = rank
                        room = (size_class, index, True)
        return room

    def _entry_at(self, size_class: int, seq_at: int, index: int) -> tuple[bytes, Entry]:
        """The key and entry in slot ``index`` of a group (with its lock)."""
        layout = self.classes[size_class]
        slot = (seq_at << 3) + GROUP_HEAD + index * layout.slot
        half = slot + 8 + self.words[slot >> 3] * layout.half
        expires, kind, key_len, value_len, _ = HALF_HEAD.unpack_from(self.mem, half)
        start = half + KEY_AT
        key = self.mem[start : start + key_len]
        value = self.mem[start + key_len : start + key_len + value_len]
        entry: Entry = _entry(Entry, (size_class, index, kind, expires, value))
        return key, entry

    # -- spilling --------------------------------------------------------------------------

    def spilled(self, place: Place, mark: int = 1) -> bool:
        """Whether a key of ``place``'s class-0 group may live in the caller's overflow
        store: ``mark`` is the caller's bit for a kind of key (default 1)."""
        return bool(self.words[place.seqs[0] + 1] & mark)

    def mark_spilled(self, place: Place | bytes, mark: int = 1) -> None:
        """Note (for good) that a key of ``place``'s class-0 group (or of a key's, given as
        bytes), of the kind the caller calls ``mark`` (a bit), went to the overflow store."""
        at = self.layout.spilled_word(place) if isinstance(place, bytes) else place.seqs[0] + 1
        self.words[at] |= mark
        self.words[0] = 1

    @property
    def any_spilled(self) -> bool:
        """Whether any key ever went to the overflow store."""
        return bool(self.words[0])

    # -- whole groups (``workers.shared.table_upkeep`` scans and sweeps with these) ---------------

    def group_lock(self, group: int) -> SharedMutex:
        """The lock of group number ``group`` (of any class)."""
        return self._stripes[group & (self.stripes - 1)]

    def group_entries(self, size_class: int, seq_at: int) -> list[tuple[int, Stored]]:
        """``(slot, Stored)`` of every key in the group whose sequence word is ``seq_at``
        (with its lock)."""
        layout = self.classes[size_class]
        words = self.words
        mem = self.mem
        out = []
        for index in range(GROUP_SLOTS):
            if words[seq_at + 2 + index] & 1:
                slot = (seq_at << 3) + GROUP_HEAD + index * layout.slot
                half = slot + 8 + words[slot >> 3] * layout.half
                expires, kind, key_len, _, _ = HALF_HEAD.unpack_from(mem, half)
                key = mem[half + KEY_AT : half + KEY_AT + key_len]
                out.append((index, Stored(key, kind, expires)))
        return out

    def set_tags(self, seq_at: int, tags: dict[int, int]) -> None:
        """Set the tag words of some slots of a group (``{slot: tag}``, with its lock): a
        removal (``TOMB``) or a slot no probe needs any more (0)."""
        words = self.words
        words[seq_at] += 1  # odd: readers of this group read again
        for index, tag in tags.items():
            words[seq_at + 2 + index] = tag
        words[seq_at] += 1

    # -- a dead lock owner -----------------------------------------------------------------

    def owner_died(self, mutex: SharedMutex) -> None:
        """We hold ``mutex``, taken from a holder that died: finish its work (module doc)."""
        words = self.words
        seen: set[bytes] = set()
        odd = []
        for size_class, layout in enumerate(self.classes):
            for group in range(mutex.number, layout.groups, self.stripes):
                seq_at = layout.seq_at(group)
                if words[seq_at] & 1:
                    odd.append(seq_at)
                    for index, stored in self.group_entries(size_class, seq_at):
                        tag_at = seq_at + 2 + index
                        tag = (hash(stored.key) & TAG_MASK) | 1
                        if stored.key in seen or tag != words[tag_at]:
                            words[tag_at] = TOMB  # a copy moved on, or another key's half
                        else:
                            seen.add(stored.key)
        for seq_at in odd:
            words[seq_at] += 1  # the dead writer's data is whole (double-buffered slots)

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Unmap and close everything this process holds."""
        if self._memfd < 0:
            return
        os.close(self._memfd)
        self._memfd = -1
        self._stripes = []
        self.words.release()
        with contextlib.suppress(BufferError):
            self.mem.close()
