"""A hash table in shared memory that every worker reads and updates itself.

Theory of operation
-------------------
The master makes one ``SharedTable`` before the first fork (a memfd mapped ``MAP_SHARED``), so
every worker, and every worker respawned later, maps the same pages. A key hashes to a *home*
slot; its *group* is the ``GROUP_SLOTS`` slots around it, and it lives in that group or not in
the table at all (linear probing that wraps inside the group). The hash is Python's own:
every process that maps the table is a fork of the one that made it, so all share the seed.

Writers take the group's lock: one of ``stripes`` process-shared *robust* pthread mutexes
(group number modulo ``stripes``) kept in the table's own header and called through
``ctypes``. An uncontended lock and unlock are two atomic instructions in the C library, no
system call. Nothing waits in the kernel: ``pthread_mutex_trylock``, a few quick retries, then
cooperative sleeps (``pause``: gevent's sleep in a worker), bounded by ``LOCK_TIMEOUT``. A
greenlet that holds a lock across a wait (``hold``) keeps the other greenlets of its process
out too, because a mutex held by this thread is busy for this thread as well. When the owner
of a mutex dies, even by ``kill -9``, the kernel marks it (the robust futex list); the next
``trylock`` then succeeds with ``EOWNERDEAD`` and repairs what the owner left (below).

Readers take no lock. Each group has a sequence word that a writer makes odd before it touches
the group and even after; a reader reads it, reads the slot, and reads it again: a change (or
an odd value) means "read again", and after ``READ_TRIES`` the reader takes the lock. That needs
loads to stay in program order and stores too, which x86-64 guarantees; elsewhere ``read``
always takes the lock. Only values are read this way: nothing reads a token bucket without
its lock, so rewriting a bucket in the slot it already has may leave the sequence word alone
(``workers.shared.table_store``), as no reader of another key looks at that slot.

The lock calls are the cost floor of every write (about 0.2 µs each through ``ctypes``), so
callers that repeat keys keep a key's ``place`` (hash, group, lock, offsets) and do the
common case themselves in a few word and struct operations.

A writer killed while holding the lock must leave the group readable. Each slot therefore has
two *halves* and a control word saying which half is current: a write fills the other half,
then flips the word with one aligned 8-byte store, and a new key becomes visible when its tag
(its hash, always odd) is stored, last. A write cut short leaves the previous version, never a
torn one; the sequence words it may have left odd are made even again by whoever next gets
its lock with ``EOWNERDEAD``. A removed key leaves a tombstone tag so that probing goes on
past it.

Layout: a header (word 0: some group has spilled; then one 64-byte mutex per stripe), then
the groups. A group is
``seq``, ``spilled`` (keys of this group may live in the master's store, see
``workers.shared.table_store``), ``GROUP_SLOTS`` tags, then the slots. A slot is its control
word and two halves; a half is ``expires:f64 kind:u8 key_len:u8 value_len:u16``, 4 spare bytes, then
the key and the value, at most ``SLOT_DATA`` bytes together.

This module knows slots, not store semantics (``workers.shared.table_store`` has those).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import mmap
import os
import platform
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "GROUP_SLOTS",
    "HALF",
    "KEY_AT",
    "MAX_KEY",
    "SLOT_DATA",
    "Entry",
    "Place",
    "SharedTable",
    "TableBusy",
    "mutex_trylock",
    "mutex_unlock",
]

GROUP_SLOTS = 16
SLOT_DATA = 240  # key + value bytes one half holds
MAX_KEY = 255  # a half stores the key length in one byte
DEFAULT_GROUPS = 4096  # 65 536 slots, about 35 MB of address space (pages used on first touch)
DEFAULT_STRIPES = 32
LOCK_TIMEOUT = 10.0  # seconds a caller waits for a lock before giving up (a stuck worker)
QUICK_TRIES = 32  # lock attempts before the first cooperative sleep
READ_TRIES = 8  # lock-free read attempts before a reader takes the lock
LOCK_FREE_READS = platform.machine() in ("x86_64", "AMD64")  # loads and stores stay ordered

_MUTEX = 64  # room for a pthread_mutex_t (40 bytes on x86-64 glibc), one cache line
_MAX_STRIPES = 256
_HEADER = 64 + _MAX_STRIPES * _MUTEX
try:
    _LIBC: Any = ctypes.CDLL(None, use_errno=True)
    # PERF: the lock calls run per store operation. Through PyDLL (the GIL kept: they never
    # block) with no argtypes, given prebuilt ``c_void_p`` objects, a trylock and unlock pair
    # costs about half what CDLL with argtypes and errno swapping does.
    _FAST: Any = ctypes.PyDLL(None)
    mutex_trylock: Any = _FAST.pthread_mutex_trylock
    mutex_unlock: Any = _FAST.pthread_mutex_unlock
    _consistent: Any = _FAST.pthread_mutex_consistent
except (OSError, AttributeError):  # a C library without robust mutexes: no table here
    _LIBC = mutex_trylock = mutex_unlock = _consistent = None
_PTHREAD_PROCESS_SHARED = 1
_PTHREAD_MUTEX_ROBUST = 1
_HALF_HEAD = struct.Struct("<dBBH4x")  # expires, kind, key length, value length
KEY_AT = _HALF_HEAD.size
_KEY_LEN_AT = 9  # offset of key_len in a half
HALF = _HALF_HEAD.size + SLOT_DATA
_SLOT = 8 + 2 * HALF
_GROUP_HEAD = 16 + 8 * GROUP_SLOTS  # seq, spilled, tags
_GROUP = _GROUP_HEAD + GROUP_SLOTS * _SLOT
_WORDS_PER_GROUP = _GROUP // 8
_LAST = GROUP_SLOTS - 1

_TOMB = 2  # a removed key's tag (live tags are odd, free ones 0)
_TAG_MASK = (1 << 64) - 1

# One entry as read from a slot: (slot number in its group, kind, expires, value).
Entry = tuple[int, int, float, bytes]


def _group_at(home: int) -> int:
    """The byte offset of the group that home slot ``home`` belongs to.

    A group starts with its sequence word, its spill flag, then one tag word per slot.
    """
    return _HEADER + (home // GROUP_SLOTS) * _GROUP


# What a caller may cache about a key (``place``): the key, its home slot, its tag, its
# group's mutex, the word indexes of the group's sequence word (the ``spilled`` word follows
# it), of the home slot's tag and of its control word, and the byte offset of the home slot's
# first half (the second is ``HALF`` bytes further).
Place = tuple[bytes, int, int, Any, int, int, int, int]


class TableBusy(Exception):
    """A group lock stayed taken for ``LOCK_TIMEOUT`` seconds (its holder is stuck)."""


class SharedTable:
    """Groups of double-buffered slots in memory shared across ``fork()`` (module doc)."""

    def __init__(self, groups: int = DEFAULT_GROUPS, stripes: int = DEFAULT_STRIPES) -> None:
        if groups < 1 or groups & (groups - 1):
            raise ValueError("groups must be a power of two")
        if not 1 <= stripes <= _MAX_STRIPES or stripes & (stripes - 1):
            raise ValueError(f"stripes must be a power of two up to {_MAX_STRIPES}")
        if _LIBC is None:
            raise OSError("the C library offers no robust process-shared mutexes")
        self.groups = groups
        self.stripes = min(stripes, groups)
        self._home_mask = groups * GROUP_SLOTS - 1
        self._stripe_mask = self.stripes - 1
        size = _HEADER + groups * _GROUP
        self._memfd = os.memfd_create("socketify-table", os.MFD_CLOEXEC)
        os.ftruncate(self._memfd, size)
        self.mem = mmap.mmap(self._memfd, size)
        self.words = memoryview(self.mem).cast("Q")
        # How a waiter sleeps: a worker's ``workers.shared.link.Link`` makes this gevent's sleep, so
        # the other greenlets (maybe the one holding the lock) run meanwhile.
        self.pause: Callable[[float], None] = time.sleep
        base = ctypes.addressof(ctypes.c_char.from_buffer(self.mem))
        addresses = [base + 64 + n * _MUTEX for n in range(self.stripes)]
        _init_mutexes(addresses)
        self._mutexes = [ctypes.c_void_p(address) for address in addresses]

    def locate(self, key: bytes) -> tuple[int, int]:
        """``(home slot, tag)`` of ``key``; its group is ``home // GROUP_SLOTS``."""
        code = hash(key) & _TAG_MASK
        return code & self._home_mask, code | 1

    def place(self, key: bytes) -> Place:
        """Where ``key`` goes, computed once for a caller to keep (see ``Place``)."""
        code = hash(key) & _TAG_MASK
        home = code & self._home_mask
        group_at = _group_at(home)
        first = home & _LAST
        slot = group_at + _GROUP_HEAD + first * _SLOT
        return (
            key,
            home,
            code | 1,
            self._mutexes[(home // GROUP_SLOTS) & self._stripe_mask],
            group_at >> 3,
            (group_at >> 3) + 2 + first,
            slot >> 3,
            slot + 8,
        )

    # -- locking ---------------------------------------------------------------------------

    def lock(self, home: int) -> Any:
        """Take the lock of ``home``'s group (cooperatively); returns what ``unlock`` takes."""
        mutex = self._mutexes[(home // GROUP_SLOTS) & self._stripe_mask]
        failed = mutex_trylock(mutex)
        if failed:
            self.wait_lock(mutex, failed)
        return mutex

    def unlock(self, mutex: Any) -> None:
        """Release a lock taken by ``lock``."""
        mutex_unlock(mutex)

    @contextlib.contextmanager
    def hold(self, home: int) -> Iterator[None]:
        """Hold ``home``'s group lock across cooperative waits."""
        mutex = self.lock(home)
        try:
            yield
        finally:
            mutex_unlock(mutex)

    def wait_lock(self, mutex: Any, failed: int) -> None:
        """Wait for ``mutex`` after a ``mutex_trylock`` that answered ``failed``."""
        deadline = 0.0
        pause = 0.00005
        tries = 0
        while True:
            if failed == errno.EOWNERDEAD:
                self._recover(mutex)
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
                self.pause(pause)
                pause = min(0.0002, pause * 2)
            failed = mutex_trylock(mutex)
            if not failed:
                return

    def _recover(self, mutex: Any) -> None:
        """We hold the lock of an owner that died: its groups may have odd sequence words."""
        _consistent(mutex)
        stripe = self._mutexes.index(mutex)
        words = self.words
        for group in range(stripe, self.groups, self.stripes):
            seq = (_HEADER + group * _GROUP) >> 3
            if words[seq] & 1:
                words[seq] += 1  # the dead writer's data is whole (double-buffered slots)

    # -- reading ---------------------------------------------------------------------------

    def read(self, home: int, tag: int, key: bytes) -> Entry | None:
        """The entry of ``key`` (expired or not) or None, without the lock when possible."""
        if LOCK_FREE_READS:
            words = self.words
            seq_at = (_HEADER // 8) + (home // GROUP_SLOTS) * _WORDS_PER_GROUP
            for _ in range(READ_TRIES):
                seq = words[seq_at]
                if not seq & 1:
                    entry = self.find(home, tag, key)
                    if words[seq_at] == seq:
                        return entry
        stripe = self.lock(home)
        try:
            return self.find(home, tag, key)
        finally:
            self.unlock(stripe)

    def find(self, home: int, tag: int, key: bytes) -> Entry | None:
        """The entry of ``key`` (expired or not), or None (with the lock, or from ``read``)."""
        words = self.words
        group_at = _group_at(home)
        tags = (group_at >> 3) + 2
        first = home & _LAST
        for step in range(GROUP_SLOTS):
            index = (first + step) & _LAST
            found = words[tags + index]
            if found == tag:
                slot = group_at + _GROUP_HEAD + index * _SLOT
                half = slot + 8 + words[slot >> 3] * HALF
                mem = self.mem
                expires, kind, key_len, value_len = _HALF_HEAD.unpack_from(mem, half)
                start = half + KEY_AT
                if key_len == len(key) and mem[start : start + key_len] == key:
                    start += key_len
                    return index, kind, expires, mem[start : start + value_len]
            elif not found:
                return None
        return None

    def index_of(self, home: int, tag: int, key: bytes) -> int:
        """The slot number of ``key`` in its group, or -1 (with the lock)."""
        words = self.words
        group_at = _group_at(home)
        tags = (group_at >> 3) + 2
        first = home & _LAST
        mem = self.mem
        for step in range(GROUP_SLOTS):
            index = (first + step) & _LAST
            found = words[tags + index]
            if found == tag:
                slot = group_at + _GROUP_HEAD + index * _SLOT
                half = slot + 8 + words[slot >> 3] * HALF
                if mem[half + _KEY_LEN_AT] == len(key):
                    start = half + KEY_AT
                    if mem[start : start + len(key)] == key:
                        return index
            elif not found:
                return -1
        return -1

    def put(
        self,
        home: int,
        tag: int,
        key: bytes,
        kind: int,
        expires: float,
        value: bytes,
        now: float,
    ) -> bool:
        """Store an entry where ``key`` is, or in a free slot if the group never spilled.

        False when that is not possible: the caller must involve the master (with the lock).
        """
        if len(key) + len(value) > SLOT_DATA or len(key) > MAX_KEY:
            return False
        index = self.index_of(home, tag, key)
        if index < 0:
            if self.spilled(home):
                return False
            index = self.free_slot(home, now)
            if index < 0:
                return False
        self.write(home, index, tag, key, kind, expires, value)
        return True

    # -- writing (with the group locked) ---------------------------------------------------

    def write(
        self,
        home: int,
        index: int,
        tag: int,
        key: bytes,
        kind: int,
        expires: float,
        value: bytes,
    ) -> None:
        """Store an entry in slot ``index`` of ``home``'s group (the key's, or ``free_slot``)."""
        words = self.words
        group_at = _group_at(home)
        seq_at = group_at >> 3
        entry = _HALF_HEAD.pack(expires, kind, len(key), len(value)) + key + value
        words[seq_at] += 1  # odd: readers of this group read again
        try:
            slot = group_at + _GROUP_HEAD + index * _SLOT
            current = words[slot >> 3]
            half = slot + 8 + (current ^ 1) * HALF
            self.mem[half : half + len(entry)] = entry
            words[slot >> 3] = current ^ 1  # commit: one aligned store
            tag_at = seq_at + 2 + index
            if words[tag_at] != tag:
                words[tag_at] = tag  # a new key appears only now
        finally:
            words[seq_at] += 1

    def remove(self, home: int, index: int) -> None:
        """Free slot ``index`` of ``home``'s group (a tombstone keeps later probes going)."""
        self.words[(_group_at(home) >> 3) + 2 + index] = _TOMB

    def free_slot(self, home: int, now: float) -> int:
        """The first slot from ``home`` that is free, removed or expired; -1 if none.

        Call it only after ``find`` did not find the key.
        """
        words = self.words
        group_at = _group_at(home)
        tags = (group_at >> 3) + 2
        first = home & _LAST
        for step in range(GROUP_SLOTS):
            index = (first + step) & _LAST
            if not words[tags + index] & 1:
                return index
            slot = group_at + _GROUP_HEAD + index * _SLOT
            if _HALF_HEAD.unpack_from(self.mem, slot + 8 + words[slot >> 3] * HALF)[0] <= now:
                return index
        return -1

    # -- whole groups ----------------------------------------------------------------------

    def occupied(self, group: int) -> bool:
        """Whether any slot of ``group`` holds a key (read without the lock: a hint)."""
        tags = ((_HEADER + group * _GROUP) >> 3) + 2
        return any(tag & 1 for tag in self.words[tags : tags + GROUP_SLOTS])

    def entries(self, group: int) -> list[tuple[int, bytes, int, float]]:
        """Every key of ``group``, with the lock: ``(slot number, key, kind, expires)``."""
        words = self.words
        group_at = _HEADER + group * _GROUP
        tags = (group_at >> 3) + 2
        out = []
        for index in range(GROUP_SLOTS):
            if words[tags + index] & 1:
                slot = group_at + _GROUP_HEAD + index * _SLOT
                half = slot + 8 + words[slot >> 3] * HALF
                expires, kind, key_len, _ = _HALF_HEAD.unpack_from(self.mem, half)
                key = self.mem[half + KEY_AT : half + KEY_AT + key_len]
                out.append((index, key, kind, expires))
        return out

    # -- spilling to the master ------------------------------------------------------------

    def spilled(self, home: int) -> bool:
        """Whether keys of ``home``'s group may live in the master's store."""
        return bool(self.words[(_group_at(home) >> 3) + 1])

    def mark_spilled(self, home: int) -> None:
        """Note that a key of ``home``'s group went to the master's store (for good)."""
        self.words[(_group_at(home) >> 3) + 1] = 1
        self.words[0] = 1

    @property
    def any_spilled(self) -> bool:
        """Whether any group has spilled."""
        return bool(self.words[0])

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Unmap and close everything this process holds."""
        if self._memfd < 0:
            return
        os.close(self._memfd)
        self._memfd = -1
        self._mutexes = []
        self.words.release()
        with contextlib.suppress(BufferError):
            self.mem.close()


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
