"""A hash table in shared memory that every worker reads and updates itself.

Theory of operation
-------------------
The master makes one ``SharedTable`` before the first fork (a memfd mapped ``MAP_SHARED``), so
every worker, and every worker respawned later, maps the same pages. The hash is Python's
own: every process that maps the table is a fork of the one that made it, so all share the
seed.

Size classes. Slots come in ``len(SLOT_DATA)`` sizes: 240 bytes of key and value (counters,
token buckets, small sessions), 1 088 (a session of up to 1 KiB) and 4 352 (a session of up
to 4 KiB with a key of up to 256 bytes). Each class is a region of *groups* of
``GROUP_SLOTS`` slots, and a key has one group in every class: the hash picks a group number
(modulo the class's group count) and a *first* slot in it. A key lives in at most one slot
of the whole table; within a group it sits at ``first`` or after it (linear probing that
wraps inside the group, so a lookup stops at a never-used slot). A new entry goes to the
smallest class it fits, in a free, removed or expired slot of its group. When there is none,
the entry of that group written longest ago *among those with an expiry* is evicted (never
one without: those are the store's values without a TTL); when every entry of the group has
none, the next larger class is tried, and when nothing fits, ``put`` says so and the caller
keeps the entry elsewhere (``workers.table_store`` spills it to the master). So memory is
fixed at construction, and the table is a cache of bounded size for entries with a TTL.

Locks. A key's groups (one per class) are all guarded by one of ``stripes`` process-shared
*robust* pthread mutexes, kept in the table's header and called through ``ctypes``: the
stripe is the group number modulo ``stripes``, and as every group count is a power of two
at least ``stripes``, the keys of any one group of any class share their stripe. Take it
with ``with table.locked(place):``. An uncontended lock and unlock are two atomic
instructions in the C library, no system call. Nothing waits in the kernel:
``pthread_mutex_trylock``, a few quick retries, then cooperative sleeps (``pause``: gevent's
sleep in a worker), bounded by ``LOCK_TIMEOUT``. A greenlet that holds a lock across a wait
(a round trip to the master) keeps the other greenlets of its process out too, because a
mutex held by this thread is busy for this thread as well. When the owner of a mutex dies,
even by ``kill -9``, the kernel marks it (the robust futex list); the next ``trylock`` then
succeeds with ``EOWNERDEAD`` and repairs what the owner left (below).

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
version, never a torn one. A move writes the new slot before it removes the old one, so a
writer killed in between leaves the key in two classes, both whole; whoever next gets the
lock with ``EOWNERDEAD`` keeps the copy in the smallest class and makes the sequence words
even again. A removed key leaves a tombstone tag so that probing goes on past it.

Sweep. Expired entries are reclaimed by the writes that need their slots; ``sweep`` (the
master's state thread runs it, a few groups at a time, never waiting for a lock) frees them
ahead of time and turns slots that no probe needs any more back into never-used ones, so
lookups that miss stay short. A byte per group records whether it ever held a key, so
neither the sweep nor a prefix scan touches the pages of groups nobody used.

Layout: a header (word 0: some group has spilled; then one 64-byte mutex per stripe; then
the used byte of every group), then each class's groups. A group is ``seq``, ``spilled``
(keys whose class-0 group this is may live in the caller's overflow store), ``GROUP_SLOTS``
tags, then the slots. A slot is its control word and two halves; a half is ``expires:f64
kind:u8 key_len:u8 value_len:u16 written:f32`` (``written``: when, for eviction), then the
key and the value, at most the class's ``SLOT_DATA`` bytes together.

This module knows slots, locks and eviction, not store semantics (``workers.table_store``
has those): ``kind`` is opaque here, and an entry "has an expiry" when ``expires`` is finite.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import math
import mmap
import os
import platform
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = [
    "DEFAULT_GROUPS",
    "GROUP_SLOTS",
    "MAX_KEY",
    "SLOT_DATA",
    "Entry",
    "Place",
    "SharedTable",
    "Stored",
    "TableBusy",
    "groups_for",
]

GROUP_SLOTS = 16
SLOT_DATA = (240, 1088, 4352)  # key + value bytes a slot holds, per size class
MAX_KEY = 255  # a half stores the key length in one byte
# 102 MiB of address space: 65 536 small slots, 16 384 of 1 KiB, 4 096 of 4 KiB.
# Pages count (in every process that touches them) only once used.
DEFAULT_GROUPS = (4096, 1024, 256)
DEFAULT_STRIPES = 32
LOCK_TIMEOUT = 10.0  # seconds a caller waits for a lock before giving up (a stuck worker)
QUICK_TRIES = 32  # lock attempts before the first cooperative sleep
READ_TRIES = 8  # lock-free read attempts before a reader takes the lock
LOCK_FREE_READS = platform.machine() in ("x86_64", "AMD64")  # loads and stores stay ordered

_MUTEX = 64  # room for a pthread_mutex_t (40 bytes on x86-64 glibc), one cache line
_MAX_STRIPES = 256
_MUTEXES_AT = 64
_USED_AT = _MUTEXES_AT + _MAX_STRIPES * _MUTEX
_PAGE = 4096
try:
    _LIBC: Any = ctypes.CDLL(None, use_errno=True)
    # PERF: the lock calls run per store operation. Through PyDLL (the GIL kept: they never
    # block) with no argtypes, given prebuilt ``c_void_p`` objects, a trylock and unlock pair
    # costs about half what CDLL with argtypes and errno swapping does.
    _FAST: Any = ctypes.PyDLL(None)
    _trylock: Any = _FAST.pthread_mutex_trylock
    _unlock: Any = _FAST.pthread_mutex_unlock
    _consistent: Any = _FAST.pthread_mutex_consistent
except (OSError, AttributeError):  # a C library without robust mutexes: no table here
    _LIBC = _trylock = _unlock = _consistent = None
_PTHREAD_PROCESS_SHARED = 1
_PTHREAD_MUTEX_ROBUST = 1
_HALF_HEAD = struct.Struct("<dBBHf")  # expires, kind, key length, value length, written
_KEY_AT = _HALF_HEAD.size
_GROUP_HEAD = 16 + 8 * GROUP_SLOTS  # seq, spilled, tags
_LAST = GROUP_SLOTS - 1
_TOMB = 2  # a removed key's tag (live tags are odd, free ones 0)
_TAG_MASK = (1 << 64) - 1


class Entry(NamedTuple):
    """One key's entry as read from its slot."""

    size_class: int  # which class of slots it is in
    slot: int  # its slot in its group
    kind: int  # the caller's tag for what the value is
    expires: float  # on the caller's clock; ``inf`` for none
    value: bytes


class Stored(NamedTuple):
    """A key as a scan of the whole table sees it."""

    key: bytes
    kind: int
    expires: float


# PERF: ``_entry(Entry, (...))`` builds one in a single C call (NamedTuple's ``__new__`` is
# Python code), once per read.
_entry: Any = tuple.__new__


@dataclass(frozen=True, slots=True)
class Place:
    """Where a key goes, computed once (``SharedTable.place``) for a caller to keep."""

    key: bytes
    tag: int  # the key's hash, made odd: what its slot's tag word holds
    first: int  # the slot of each of its groups where probing starts
    stripe: int  # the lock of its groups
    seqs: tuple[int, ...]  # the word index of its group's sequence word, per size class
    homes: tuple[int, ...]  # the byte offset of its slot ``first``, per size class
    head: struct.Struct  # a half's head then this key: read or written in one call


@dataclass(frozen=True)
class _Class:
    """One size class: its slot size and where its groups are."""

    data: int  # key + value bytes a half holds
    groups: int
    start: int  # byte offset of its first group
    used: int  # byte offset of its groups' used bytes
    half: int
    slot: int
    group: int  # bytes per group


class TableBusy(Exception):
    """A group lock stayed taken for ``LOCK_TIMEOUT`` seconds (its holder is stuck)."""


def groups_for(megabytes: float) -> tuple[int, ...]:
    """Group counts per size class for a table of about ``megabytes`` MiB: each class gets
    the share of the bytes it has by default, rounded down to a power of two groups (at
    least one)."""
    if not megabytes > 0:
        raise ValueError("the table size must be a positive number of MiB")
    default = [
        count * _group_bytes(data) for count, data in zip(DEFAULT_GROUPS, SLOT_DATA, strict=True)
    ]
    counts = []
    for data, share in zip(SLOT_DATA, default, strict=True):
        fit = int(megabytes * (1 << 20) * share / sum(default) // _group_bytes(data))
        counts.append(1 << max(0, fit.bit_length() - 1))
    return tuple(counts)


def _group_bytes(data: int) -> int:
    return _GROUP_HEAD + GROUP_SLOTS * (8 + 2 * (_KEY_AT + data))


class _Stripe:
    """One of the table's mutexes, as a context manager (``SharedTable.locked``)."""

    __slots__ = ("mutex", "number", "table")

    def __init__(self, table: SharedTable, number: int, mutex: Any) -> None:
        self.table = table
        self.number = number
        self.mutex = mutex

    def __enter__(self) -> None:
        failed = _trylock(self.mutex)
        if failed:
            self.wait(failed)

    def __exit__(self, *_: object) -> None:
        _unlock(self.mutex)

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it; never waits (repairs after a dead owner)."""
        failed = _trylock(self.mutex)
        if failed == errno.EOWNERDEAD:
            self.table.repair(self)
            return True
        return not failed

    def wait(self, failed: int) -> None:
        """Wait for the mutex after a ``trylock`` that answered ``failed``."""
        deadline = 0.0
        pause = 0.00005
        tries = 0
        while True:
            if failed == errno.EOWNERDEAD:
                self.table.repair(self)
                return
            if failed != errno.EBUSY:
                raise OSError(failed, f"pthread_mutex_trylock: {os.strerror(failed)}")
            tries += 1
            if tries > QUICK_TRIES:
                # The holder is descheduled, slow, or a greenlet of this process waiting on
                # the master: let this worker's other greenlets run meanwhile.
                now = time.monotonic()
                if not deadline:
                    deadline = now + LOCK_TIMEOUT
                elif now > deadline:
                    raise TableBusy(f"a shared-table lock stayed taken for {LOCK_TIMEOUT:g} s")
                self.table.pause(pause)
                pause = min(0.0002, pause * 2)
            failed = _trylock(self.mutex)
            if not failed:
                return


class SharedTable:
    """Size classes of double-buffered slots in memory shared across ``fork()`` (module doc)."""

    def __init__(
        self, groups: Sequence[int] = DEFAULT_GROUPS, stripes: int = DEFAULT_STRIPES
    ) -> None:
        if len(groups) != len(SLOT_DATA):
            raise ValueError(f"give a group count for each of the {len(SLOT_DATA)} size classes")
        if any(count < 1 or count & (count - 1) for count in groups):
            raise ValueError("group counts must be powers of two")
        if not 1 <= stripes <= _MAX_STRIPES or stripes & (stripes - 1):
            raise ValueError(f"stripes must be a power of two up to {_MAX_STRIPES}")
        if _LIBC is None:
            raise OSError("the C library offers no robust process-shared mutexes")
        self.stripes = min(stripes, *groups)
        classes = []
        used = _USED_AT
        start = _round_up(_USED_AT + sum(groups), _PAGE)
        for data, count in zip(SLOT_DATA, groups, strict=True):
            half = _KEY_AT + data
            group = _group_bytes(data)
            classes.append(_Class(data, count, start, used, half, 8 + 2 * half, group))
            used += count
            start = _round_up(start + count * group, _PAGE)
        self.classes = tuple(classes)
        self._sizes = tuple((c.slot, c.half) for c in classes)  # for the lookups' sake
        self._halves = tuple(c.half for c in classes)
        self.size = start
        self._memfd = os.memfd_create("socketify-table", os.MFD_CLOEXEC)
        os.ftruncate(self._memfd, self.size)
        self.mem = mmap.mmap(self._memfd, self.size)
        self.words = memoryview(self.mem).cast("Q")
        # How a waiter sleeps: a worker's ``workers.link.Link`` makes this gevent's sleep, so
        # the other greenlets (maybe the one holding the lock) run meanwhile.
        self.pause: Callable[[float], None] = time.sleep
        base = ctypes.addressof(ctypes.c_char.from_buffer(self.mem))
        addresses = [base + _MUTEXES_AT + n * _MUTEX for n in range(self.stripes)]
        _init_mutexes(addresses)
        self._stripes = [
            _Stripe(self, n, ctypes.c_void_p(address)) for n, address in enumerate(addresses)
        ]

    @property
    def groups(self) -> tuple[int, ...]:
        """The group count of each size class."""
        return tuple(size_class.groups for size_class in self.classes)

    @property
    def max_data(self) -> int:
        """The most key + value bytes one entry may have."""
        return self.classes[-1].data

    def place(self, key: bytes) -> Place:
        """Where ``key`` goes (its groups and lock), for the caller to keep and pass back."""
        code = hash(key) & _TAG_MASK
        number = code >> 4
        first = code & _LAST
        groups = [c.start + (number & (c.groups - 1)) * c.group for c in self.classes]
        homes = tuple(
            at + _GROUP_HEAD + first * c.slot for at, c in zip(groups, self.classes, strict=True)
        )
        seqs = tuple(at >> 3 for at in groups)
        stripe = number & (self.stripes - 1)
        return Place(key, code | 1, first, stripe, seqs, homes, _head(len(key)))

    def locked(self, place: Place) -> _Stripe:
        """The lock of ``place``'s groups: ``with table.locked(place): ...`` (cooperative
        waits, ``TableBusy`` after ``LOCK_TIMEOUT``)."""
        return self._stripes[place.stripe]

    # -- reading ---------------------------------------------------------------------------

    def read(self, place: Place) -> Entry | None:
        """The entry of ``place``'s key (expired or not) or None, without the lock when possible.

        Each class's look needs only its own group to stay unchanged meanwhile: an entry
        moves only to a larger class, and a move tags the new slot before it removes the
        old one, so looking in the classes smallest first finds a key that is there
        throughout.
        """
        if not LOCK_FREE_READS:
            with self.locked(place):
                return self.find(place)
        # PERF: the usual cases in one pass without a call per class (a third of a read's
        # cost): the key in the home slot of one of its groups, or never-used home slots.
        words = self.words
        tag = place.tag
        first = place.first
        size_class = 0
        for seq_at in place.seqs:
            seq = words[seq_at]
            found = words[seq_at + 2 + first]
            if found == tag:
                home = place.homes[size_class]
                half = home + 8 + words[home >> 3] * self._halves[size_class]
                mem = self.mem
                expires, kind, key_len, value_len, _, key = place.head.unpack_from(mem, half)
                start = half + _KEY_AT + key_len
                value = mem[start : start + value_len]
                same = key == place.key and key_len == len(key)
                if same and not seq & 1 and words[seq_at] == seq:
                    entry: Entry = _entry(Entry, (size_class, first, kind, expires, value))
                    return entry
                break  # changed meanwhile, or another key at home: look the long way
            if found:
                break  # the key may be further on in this group
            size_class += 1  # noqa: SIM113 - one load says it: the key is not in this class
        else:
            return None
        return self._read_probing(place)

    def _read_probing(self, place: Place) -> Entry | None:
        """``read`` the long way: each class's group probed, the sequence words checked."""
        words = self.words
        probe = self._probe
        first = place.first
        for _ in range(READ_TRIES):
            for size_class, seq_at in enumerate(place.seqs):
                seq = words[seq_at]
                if not words[seq_at + 2 + first]:
                    continue
                entry = probe(place, size_class, seq_at)
                if seq & 1 or words[seq_at] != seq:
                    break
                if entry is not None:
                    return entry
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
            if found == tag:
                # PERF: the usual case, the key in its home slot, without a call.
                home = place.homes[size_class]
                half = home + 8 + words[home >> 3] * self._halves[size_class]
                mem = self.mem
                expires, kind, key_len, value_len, _, key = place.head.unpack_from(mem, half)
                if key == place.key and key_len == len(key):
                    start = half + _KEY_AT + key_len
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
        found = words[seq_at + 2 + index]
        if found == tag:
            # PERF: the usual case, the key in its home slot: its half's head and key in
            # one unpack (a third of a store operation's cost).
            home = place.homes[size_class]
            half = home + 8 + words[home >> 3] * self._halves[size_class]
            mem = self.mem
            expires, kind, key_len, value_len, _, key = place.head.unpack_from(mem, half)
            if key == place.key and key_len == len(key):
                start = half + _KEY_AT + key_len
                value = mem[start : start + value_len]
                entry: Entry = _entry(Entry, (size_class, index, kind, expires, value))
                return entry
        elif not found:
            return None  # probing stops at a never-used slot
        slot_bytes, half_bytes = self._sizes[size_class]
        for _ in range(_LAST):
            index = (index + 1) & _LAST
            found = words[seq_at + 2 + index]
            if found == tag:
                slot = (seq_at << 3) + _GROUP_HEAD + index * slot_bytes
                half = slot + 8 + words[slot >> 3] * half_bytes
                mem = self.mem
                expires, kind, key_len, value_len, _, key = place.head.unpack_from(mem, half)
                if key == place.key and key_len == len(key):
                    start = half + _KEY_AT + key_len
                    value = mem[start : start + value_len]
                    entry = _entry(Entry, (size_class, index, kind, expires, value))
                    return entry
            elif not found:
                return None
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
    ) -> bool:
        """Store the key's entry: where ``found`` (the key's entry, from ``find``) is if it
        fits there, else in a new slot (evicting as the module doc says), removing ``found``.

        False when no class has room: the table is unchanged and the caller keeps the entry
        elsewhere. ``now`` is the caller's clock (expiry and eviction age).
        """
        key = place.key
        size = len(key) + len(value)
        if found is not None and size <= SLOT_DATA[found.size_class]:
            # PERF: the usual case, a new version where the key is: one pack for the head
            # and the key, one copy for the value, one store to commit.
            size_class = found.size_class
            words = self.words
            seq_at = place.seqs[size_class]
            if found.slot == place.first:
                slot = place.homes[size_class]
            else:
                slot = (seq_at << 3) + _GROUP_HEAD + found.slot * self._sizes[size_class][0]
            current = words[slot >> 3]
            half = slot + 8 + (current ^ 1) * self._halves[size_class]
            mem = self.mem
            words[seq_at] += 1  # odd: readers of this group read again
            try:
                place.head.pack_into(mem, half, expires, kind, len(key), len(value), now, key)
                start = half + _KEY_AT + len(key)
                mem[start : start + len(value)] = value
                words[slot >> 3] = current ^ 1  # commit: one aligned store
            finally:
                words[seq_at] += 1
            return True
        if len(key) > MAX_KEY:
            return False
        target = self._new_slot(place, size, now)
        if target is None:
            return False
        size_class, index = target
        words = self.words
        seq_at = place.seqs[size_class]
        moved_from = place.seqs[found.size_class] if found is not None else -1
        words[seq_at] += 1  # odd: readers of these groups read again
        if moved_from >= 0:
            words[moved_from] += 1
        try:
            self._fill(seq_at, size_class, index, key, kind, expires, value, now)
            words[seq_at + 2 + index] = place.tag  # the key appears only now...
            self.mem[self.classes[size_class].used + self._group_number(size_class, seq_at)] = 1
            if found is not None:
                words[moved_from + 2 + found.slot] = _TOMB  # ...and only then leaves
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
        """The usual write in one step under the key's lock: a new version of an entry that
        is in its home slot (the group's ``first``) and still fits there.

        With ``expected``, only over an entry of the same ``kind``, unexpired at ``now``,
        that holds ``expected`` (a compare-and-set). True when written; False when the
        entry holds another value; None when this cannot decide (the key elsewhere or
        absent, the new version too big, another kind, expired): then ``find`` and ``put``.
        PERF: half the cost of ``locked``, ``find`` and ``put``, and a shorter hold of the
        lock, which matters when two workers write one key.
        """
        stripe = self._stripes[place.stripe]
        failed = _trylock(stripe.mutex)
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
                start = half + _KEY_AT + key_len
                if mem[start : start + value_len] != expected:
                    return False
            half = home + 8 + (current ^ 1) * half_bytes
            words[seq_at] += 1  # odd: readers of this group read again
            try:
                place.head.pack_into(mem, half, expires, kind, key_len, len(value), now, key)
                start = half + _KEY_AT + key_len
                mem[start : start + len(value)] = value
                words[home >> 3] = current ^ 1  # commit: one aligned store
            finally:
                words[seq_at] += 1
            return True
        finally:
            _unlock(stripe.mutex)

    def remove(self, place: Place, entry: Entry) -> None:
        """Remove ``entry`` (the key's, from ``find``); a tombstone keeps later probes going."""
        words = self.words
        seq_at = place.seqs[entry.size_class]
        words[seq_at] += 1
        words[seq_at + 2 + entry.slot] = _TOMB
        words[seq_at] += 1

    def _fill(
        self,
        seq_at: int,
        size_class: int,
        index: int,
        key: bytes,
        kind: int,
        expires: float,
        value: bytes,
        now: float,
    ) -> None:
        """Write the spare half of a slot and make it current (its group already odd)."""
        slot_bytes, half_bytes = self._sizes[size_class]
        words = self.words
        slot = (seq_at << 3) + _GROUP_HEAD + index * slot_bytes
        current = words[slot >> 3]
        half = slot + 8 + (current ^ 1) * half_bytes
        mem = self.mem
        _HALF_HEAD.pack_into(mem, half, expires, kind, len(key), len(value), now)
        start = half + _KEY_AT
        mem[start : start + len(key)] = key
        start += len(key)
        mem[start : start + len(value)] = value
        words[slot >> 3] = current ^ 1  # commit: one aligned store

    def _new_slot(self, place: Place, size: int, now: float) -> tuple[int, int] | None:
        """``(class, slot)`` for a new entry of ``size`` bytes: a free, removed or expired
        slot of the smallest class it fits, else the oldest entry with an expiry there (to
        evict), else the same in the next class; None when there is no room."""
        words = self.words
        mem = self.mem
        first = place.first
        for size_class, layout in enumerate(self.classes):
            if layout.data < size:
                continue
            seq_at = place.seqs[size_class]
            tags = seq_at + 2
            group_at = (seq_at << 3) + _GROUP_HEAD
            oldest = -1
            oldest_written = math.inf
            for step in range(GROUP_SLOTS):
                index = (first + step) & _LAST
                if not words[tags + index] & 1:
                    return size_class, index
                slot = group_at + index * layout.slot
                half = slot + 8 + words[slot >> 3] * layout.half
                expires, _, _, _, written = _HALF_HEAD.unpack_from(mem, half)
                if expires <= now:
                    return size_class, index
                if expires != math.inf and written < oldest_written:
                    oldest, oldest_written = index, written
            if oldest >= 0:
                return size_class, oldest
        return None

    def _group_number(self, size_class: int, seq_at: int) -> int:
        layout = self.classes[size_class]
        return ((seq_at << 3) - layout.start) // layout.group

    # -- spilling --------------------------------------------------------------------------

    def spilled(self, place: Place) -> bool:
        """Whether ``place``'s key may live in the caller's overflow store."""
        return bool(self.words[place.seqs[0] + 1])

    def mark_spilled(self, place: Place) -> None:
        """Note (for good) that a key of ``place``'s class-0 group went to the overflow store."""
        self.words[place.seqs[0] + 1] = 1
        self.words[0] = 1

    @property
    def any_spilled(self) -> bool:
        """Whether any key ever went to the overflow store."""
        return bool(self.words[0])

    # -- the whole table -------------------------------------------------------------------

    def select(self, test: Callable[[Stored], bool]) -> list[Stored]:
        """Every entry (expired or not) for which ``test`` is true, each group under its lock."""
        return self._visit(test, remove=False)

    def remove_where(self, test: Callable[[Stored], bool]) -> list[Stored]:
        """Remove every entry for which ``test`` is true (under its group's lock); those."""
        return self._visit(test, remove=True)

    def _visit(self, test: Callable[[Stored], bool], remove: bool) -> list[Stored]:
        out: list[Stored] = []
        words = self.words
        for size_class, layout in enumerate(self.classes):
            for group in range(layout.groups):
                if not self.mem[layout.used + group]:
                    continue  # never held a key: do not even touch its pages
                seq_at = (layout.start + group * layout.group) >> 3
                with self._stripes[group & (self.stripes - 1)]:
                    for index, stored in self._entries(size_class, seq_at):
                        if test(stored):
                            out.append(stored)
                            if remove:
                                words[seq_at] += 1
                                words[seq_at + 2 + index] = _TOMB
                                words[seq_at] += 1
        return out

    def _entries(self, size_class: int, seq_at: int) -> list[tuple[int, Stored]]:
        """``(slot, Stored)`` of every key in a group (with its lock)."""
        layout = self.classes[size_class]
        words = self.words
        mem = self.mem
        out = []
        for index in range(GROUP_SLOTS):
            if words[seq_at + 2 + index] & 1:
                slot = (seq_at << 3) + _GROUP_HEAD + index * layout.slot
                half = slot + 8 + words[slot >> 3] * layout.half
                expires, kind, key_len, _, _ = _HALF_HEAD.unpack_from(mem, half)
                key = mem[half + _KEY_AT : half + _KEY_AT + key_len]
                out.append((index, Stored(key, kind, expires)))
        return out

    def sweep(self, now: float, cursor: int, budget: int) -> int:
        """Free the expired entries of up to ``budget`` groups from ``cursor`` (a count over
        every class's groups), skipping groups whose lock is taken; returns the next cursor
        (0 once every group was visited).

        Also turns slots that no lookup needs to probe past back into never-used ones.
        """
        total = sum(self.groups)
        end = min(total, cursor + budget)
        for number in range(cursor, end):
            size_class = 0
            group = number
            while group >= self.classes[size_class].groups:
                group -= self.classes[size_class].groups
                size_class += 1
            layout = self.classes[size_class]
            if not self.mem[layout.used + group]:
                continue
            stripe = self._stripes[group & (self.stripes - 1)]
            if not stripe.try_acquire():
                continue  # busy (maybe waiting on the master, which may be the caller)
            try:
                self._compact(size_class, group, now)
            finally:
                _unlock(stripe.mutex)
        return 0 if end >= total else end

    def _compact(self, size_class: int, group: int, now: float) -> None:
        """Free a group's expired slots and forget tombstones no probe needs (with its lock)."""
        layout = self.classes[size_class]
        seq_at = (layout.start + group * layout.group) >> 3
        words = self.words
        tags = seq_at + 2
        live = []
        for index, stored in self._entries(size_class, seq_at):
            if stored.expires > now:
                live.append((index, hash(stored.key) & _LAST))
        needed = [False] * GROUP_SLOTS  # slots a live key's lookup passes on its way
        for index, first in live:
            position = first
            while position != index:
                needed[position] = True
                position = (position + 1) & _LAST
        keep = {index for index, _ in live}
        wanted = [
            words[tags + i] if i in keep else (_TOMB if needed[i] else 0)
            for i in range(GROUP_SLOTS)
        ]
        if wanted == list(words[tags : tags + GROUP_SLOTS]):
            return
        words[seq_at] += 1
        for index in range(GROUP_SLOTS):
            words[tags + index] = wanted[index]
        words[seq_at] += 1
        if not live:
            self.mem[layout.used + group] = 0

    # -- a dead lock owner -----------------------------------------------------------------

    def repair(self, stripe: _Stripe) -> None:
        """We hold ``stripe``'s lock, taken from an owner that died: finish its work.

        Its groups may have odd sequence words; a key it was moving between classes may be
        in two (the copy in the smaller class stays: both are whole); and a slot it was
        giving to a new key in place of an evicted or expired one may hold the new key's
        entry under the old key's tag (freed: the new key's write never happened).
        """
        _consistent(stripe.mutex)
        words = self.words
        seen: set[bytes] = set()
        odd = []
        for size_class, layout in enumerate(self.classes):
            for group in range(stripe.number, layout.groups, self.stripes):
                seq_at = (layout.start + group * layout.group) >> 3
                if words[seq_at] & 1:
                    odd.append(seq_at)
                    for index, stored in self._entries(size_class, seq_at):
                        tag_at = seq_at + 2 + index
                        if (
                            stored.key in seen
                            or (hash(stored.key) & _TAG_MASK) | 1 != words[tag_at]
                        ):
                            words[tag_at] = _TOMB
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


_HEADS: dict[int, struct.Struct] = {}


def _head(key_len: int) -> struct.Struct:
    """The layout of a half's head followed by a key of ``key_len`` bytes."""
    head = _HEADS.get(key_len)
    if head is None:
        head = _HEADS[key_len] = struct.Struct(f"{_HALF_HEAD.format}{key_len}s")
    return head


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step


def _init_mutexes(addresses: list[int]) -> None:
    """Make process-shared, robust mutexes at ``addresses`` (before any fork)."""
    attr = ctypes.create_string_buffer(64)  # pthread_mutexattr_t is 4 bytes on glibc
    for call, args in (
        (_LIBC.pthread_mutexattr_init, ()),
        (_LIBC.pthread_mutexattr_setpshared, (_PTHREAD_PROCESS_SHARED,)),
        (_LIBC.pthread_mutexattr_setrobust, (_PTHREAD_MUTEX_ROBUST,)),
    ):
        if call(attr, *args):
            raise OSError(f"{call.__name__} failed: robust shared mutexes are unavailable")
    try:
        for address in addresses:
            failed = _LIBC.pthread_mutex_init(ctypes.c_void_p(address), attr)
            if failed:
                raise OSError(failed, f"pthread_mutex_init: {os.strerror(failed)}")
    finally:
        _LIBC.pthread_mutexattr_destroy(attr)
