"""The cross-worker store on the shared table, with the master's store for what does not fit.

Theory of operation
-------------------
``TableStore`` offers the operations of ``workers.shared.state`` (get/set/delete/incr/take and the
prefix operations) with the semantics of ``workers.shared.kvstore.KeyValueStore``, but a worker runs
them itself on the ``workers.shared.table.SharedTable`` that every worker maps: a short critical
section under the key's group lock instead of a round trip to the master. What one worker
wrote under the lock, the next one to take it reads (read-your-writes across workers), and
an increment or a token taken is one step under the lock (limits stay global).

A key lives in one place. It goes to the master's store (the *overflow*, a
``workers.shared.state.StateClient``) only when its entry cannot be in the table: a value over
``SLOT_DATA`` bytes, or a group with no free slot. The group is then marked *spilled*, and
from then on every operation on that group also consults the master, while holding the group
lock across the round trip, so the two places never disagree about a key:

- a read that misses the table asks the master;
- a write that lands in the table deletes the master's copy after writing the table;
- a write that goes to the master is acknowledged there before the table's copy is removed.

Both orders leave the previous value winning if the worker dies between the two steps. Groups
that never spilled (nearly all, at the default size) never talk to the master.

The usual cases (a key already in its home slot, a value that fits) run inline in ``get``,
``set`` and ``take``, on the key's place remembered per process: one struct call reads a
half, one writes the other, between one lock and one unlock (``get``: no lock). Everything
else (a probe past the home slot, a new key, a spilled group) takes the general path.

A token bucket's entry expires when it would be full again: a full bucket is the same as
none, so its slot can be reused. Bucket keys are the key behind a 0xFF byte, which no UTF-8
key starts with, so a bucket and a value of the same name stay apart as in ``KeyValueStore``.
"""

from __future__ import annotations

import math
import struct
import time
from collections.abc import Callable
from typing import Any

from workers.shared.kvstore import TakeResult, take_result
from workers.shared.link import StateError
from workers.shared.table import (
    GROUP_SLOTS,
    HALF,
    KEY_AT,
    LOCK_FREE_READS,
    MAX_KEY,
    SLOT_DATA,
    SharedTable,
    mutex_trylock,
    mutex_unlock,
)

__all__ = ["TableStore"]

BYTES, INTEGER, BUCKET = 0, 1, 2
_BUCKET_KEY = b"\xff"
_INT = struct.Struct("<q")
_BUCKET = struct.Struct("<ddd")  # tokens, stamp, full at
_BUCKET_SIZE = _BUCKET.size
_NEEDS_MASTER: Any = object()  # an operation's answer when only a round trip can decide
# A key's ``Place`` in the table, then the layout of a half of its slot (the head and the
# key; for a bucket, the whole half), None when the key is too long for a fast path.
_Known = tuple[bytes, int, int, Any, int, int, int, int, struct.Struct | None]
_PLACES_MAX = 8192  # keys whose place a store remembers (forgotten all at once past this)
_LAYOUTS: dict[str, struct.Struct] = {}  # a half's head and key (and bucket), per key length


def _layout(layout: str) -> struct.Struct:
    found = _LAYOUTS.get(layout)
    if found is None:
        found = _LAYOUTS[layout] = struct.Struct(layout)
    return found


class TableStore:
    """Store operations on the shared table; ``overflow`` is the master's store."""

    def __init__(
        self,
        table: SharedTable,
        overflow: Any,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.table = table
        self.overflow = overflow
        self._clock = clock
        self._words = table.words
        self._mem = table.mem
        # PERF: a client sends the same session id, its address, again and again; where its
        # key lives (hash, group, lock, offsets) is worked out once, not per operation.
        self._places: dict[str, _Known] = {}
        self._bucket_places: dict[str, _Known] = {}

    def _place(self, key: str) -> _Known:
        encoded = key.encode()
        # A key too long for a slot has no fast path (None): it lives in the master.
        fits = len(encoded) <= SLOT_DATA
        return self._remember(self._places, key, encoded, fits, f"<dBBH4x{len(encoded)}s")

    def _bucket_place(self, key: str) -> _Known:
        encoded = _BUCKET_KEY + key.encode()
        fits = len(encoded) + _BUCKET_SIZE <= SLOT_DATA
        layout = f"<dBBH4x{len(encoded)}sddd"  # the whole half of a bucket
        return self._remember(self._bucket_places, key, encoded, fits, layout)

    def _remember(
        self, places: dict[str, _Known], key: str, encoded: bytes, fits: bool, layout: str
    ) -> _Known:
        if len(places) >= _PLACES_MAX:
            places.clear()
        found = places[key] = (*self.table.place(encoded), _layout(layout) if fits else None)
        return found

    def _run(self, key: bytes, op: Callable[..., Any], *args: Any) -> Any:
        """``op(home, tag, key, master, *args)`` under the group lock, the master allowed
        (and the lock held across its round trip) only when the quick attempt asks for it."""
        table = self.table
        home, tag = table.locate(key)
        stripe = table.lock(home)
        try:
            result = op(home, tag, key, None, *args)
        finally:
            table.unlock(stripe)
        if result is _NEEDS_MASTER:
            with table.hold(home):
                result = op(home, tag, key, self.overflow, *args)
        return result

    # -- values ------------------------------------------------------------------------------

    def get(self, key: str) -> bytes | None:
        """The value of ``key``, or None when absent or expired."""
        known = self._places.get(key) or self._place(key)
        encoded, home, tag, _, seq_at, tag_at, control_at, half0, layout = known
        if LOCK_FREE_READS and layout is not None:
            # PERF: the usual case in one go: the key in its home slot, read without the lock
            # (the sequence word protocol of ``workers.shared.table``); anything else reads below.
            words = self._words
            seq = words[seq_at]
            stored_tag = words[tag_at]
            if stored_tag == tag:
                mem = self._mem
                half = half0 + words[control_at] * HALF
                expires, kind, key_len, value_len, stored = layout.unpack_from(mem, half)
                if stored == encoded:
                    start = half + KEY_AT + key_len
                    value = mem[start : start + value_len]
                    if not seq & 1 and words[seq_at] == seq and key_len == len(encoded):
                        if expires <= self._clock():
                            return None
                        return value if kind == BYTES else str(_INT.unpack(value)[0]).encode()
            elif not stored_tag and not words[seq_at + 1]:
                return None  # probing stops at a never-used slot, and nothing spilled
        return self._get_slow(home, tag, encoded)

    def _get_slow(self, home: int, tag: int, encoded: bytes) -> bytes | None:
        table = self.table
        entry = table.read(home, tag, encoded)  # no lock, the usual case (see workers.shared.table)
        if entry is not None:
            _, kind, expires, value = entry
            if expires <= self._clock():
                return None
            return value if kind == BYTES else str(_INT.unpack(value)[0]).encode()
        if not table.spilled(home):
            return None
        with table.hold(home):
            found: bytes | None = self._get_spilled(home, tag, encoded)
        return found

    def _get_spilled(self, home: int, tag: int, key: bytes) -> bytes | None:
        entry = self.table.find(home, tag, key)
        if entry is None:
            value: bytes | None = self.overflow.get(key.decode())
            return value
        _, kind, expires, value = entry  # written by another worker meanwhile
        if expires <= self._clock():
            return None
        return value if kind == BYTES else str(_INT.unpack(value)[0]).encode()

    def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        """Store ``value`` under ``key`` for ``ttl`` seconds (None: no expiry)."""
        if value.__class__ is not bytes:
            if not isinstance(value, bytes | bytearray | memoryview):
                raise TypeError("store values are bytes; encode them first")
            value = bytes(value)
        now = self._clock()
        if ttl is None:
            expires = math.inf
        elif ttl > 0:
            expires = now + ttl
        else:
            raise StateError("ttl must be positive seconds (or None for no expiry)")
        known = self._places.get(key) or self._place(key)
        encoded, home, tag, mutex, seq_at, tag_at, control_at, half0, layout = known
        if layout is not None and len(encoded) + len(value) <= SLOT_DATA:
            # PERF: the usual case in one go: the key already in its home slot.
            failed = mutex_trylock(mutex)
            if failed:
                self.table.wait_lock(mutex, failed)
            try:
                words = self._words
                if words[tag_at] == tag:
                    mem = self._mem
                    current = words[control_at]
                    head = layout.unpack_from(mem, half0 + current * HALF)
                    if head[4] == encoded and head[2] == len(encoded):
                        half = half0 + (current ^ 1) * HALF
                        start = half + KEY_AT + len(encoded)
                        words[seq_at] += 1  # odd: readers of this group read again
                        try:
                            layout.pack_into(
                                mem, half, expires, BYTES, len(encoded), len(value), encoded
                            )
                            mem[start : start + len(value)] = value
                            words[control_at] = current ^ 1  # commit: one aligned store
                        finally:
                            words[seq_at] += 1
                        return
            finally:
                mutex_unlock(mutex)
        table = self.table
        mutex = table.lock(home)
        try:
            done = table.put(home, tag, encoded, BYTES, expires, value, now)
        finally:
            table.unlock(mutex)
        if not done:  # the master is involved: hold the lock across its round trip
            with table.hold(home):
                self._set(home, tag, encoded, self.overflow, value, ttl, expires)

    def _set(
        self,
        home: int,
        tag: int,
        key: bytes,
        master: Any,
        value: bytes,
        ttl: float | None,
        expires: float,
    ) -> None:
        table = self.table
        entry = table.find(home, tag, key)
        index = -1
        if len(key) + len(value) <= SLOT_DATA and len(key) <= MAX_KEY:
            index = entry[0] if entry is not None else table.free_slot(home, self._clock())
        # A key found in the table has no copy in the master (see the module docstring).
        if index >= 0 and (entry is not None or not table.spilled(home)):
            table.write(home, index, tag, key, BYTES, expires, value)
            return None
        if master is None:
            return _NEEDS_MASTER
        if index >= 0:
            table.write(home, index, tag, key, BYTES, expires, value)
            master.delete(key.decode())
            return None
        table.mark_spilled(home)
        master.set(key.decode(), value, ttl, wait=True)
        if entry is not None:
            table.remove(home, entry[0])
        return None

    def delete(self, key: str) -> bool:
        """Remove ``key``; True if it existed."""
        return bool(self._run(key.encode(), self._delete))

    def _delete(self, home: int, tag: int, key: bytes, master: Any) -> Any:
        table = self.table
        entry = table.find(home, tag, key)
        if entry is not None:
            table.remove(home, entry[0])
            return entry[2] > self._clock()
        if not table.spilled(home):
            return False
        if master is None:
            return _NEEDS_MASTER
        return bool(master.delete(key.decode()))

    def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        """Add ``amount`` atomically and return the new value; ``ttl`` applies on creation."""
        expires = self._expiry(ttl)
        return int(self._run(key.encode(), self._incr, amount, ttl, expires))

    def _incr(
        self,
        home: int,
        tag: int,
        key: bytes,
        master: Any,
        amount: int,
        ttl: float | None,
        expires: float,
    ) -> Any:
        table = self.table
        entry = table.find(home, tag, key)
        if entry is not None and entry[2] > self._clock():
            index, kind, expires, value = entry
            total = _as_int(kind, value) + amount
            table.write(home, index, tag, key, INTEGER, expires, _pack_int(total))
            return total
        if entry is None and table.spilled(home):
            if master is None:
                return _NEEDS_MASTER
            return int(master.incr(key.decode(), amount, ttl))
        index = -1
        if entry is not None:
            index = entry[0]  # expired: reuse its slot
        elif len(key) + _INT.size <= SLOT_DATA and len(key) <= MAX_KEY:
            index = table.free_slot(home, self._clock())
        if index < 0:
            if master is None:
                return _NEEDS_MASTER
            table.mark_spilled(home)
            return int(master.incr(key.decode(), amount, ttl))
        table.write(home, index, tag, key, INTEGER, expires, _pack_int(amount))
        return amount

    # -- token buckets -------------------------------------------------------------------------

    def take(
        self, key: str, capacity: float, refill_per_second: float, now: float | None = None
    ) -> TakeResult:
        """Token bucket in one atomic step: ``(allowed, remaining, reset_seconds)``."""
        known = self._bucket_places.get(key) or self._bucket_place(key)
        encoded, home, tag, mutex, _, tag_at, control_at, half0, layout = known
        if layout is not None:
            # PERF: the usual case in one go: the bucket in its home slot, read and written
            # with one struct call each. No lock-free reader ever reads a bucket (``get``
            # cannot name one), so rewriting a bucket in its own slot leaves the sequence
            # word alone; the two halves still keep a write cut short from being seen.
            failed = mutex_trylock(mutex)
            if failed:
                self.table.wait_lock(mutex, failed)
            try:
                words = self._words
                if words[tag_at] == tag:
                    mem = self._mem
                    current = words[control_at]
                    expires, _, key_len, _, stored, tokens, stamp, _ = layout.unpack_from(
                        mem, half0 + current * HALF
                    )
                    at = self._clock() if now is None else now
                    if stored == encoded and key_len == len(encoded):
                        if expires <= at:  # full again by now: the same as a new bucket
                            tokens, stamp = float(capacity), at
                        elif at > stamp:
                            tokens = min(float(capacity), tokens + (at - stamp) * refill_per_second)
                            stamp = at
                        allowed = tokens >= 1.0
                        if allowed:
                            tokens -= 1.0
                        if tokens >= capacity:
                            full_at = at
                        elif refill_per_second > 0:
                            full_at = at + (capacity - tokens) / refill_per_second
                        else:
                            full_at = math.inf
                        half = half0 + (current ^ 1) * HALF
                        layout.pack_into(mem, half, full_at, BUCKET, key_len, _BUCKET_SIZE,
                                         encoded, tokens, stamp, full_at)  # fmt: skip
                        words[control_at] = current ^ 1  # commit: one aligned store
                        wait = 0.0 if tokens >= 1.0 else _wait(tokens, refill_per_second)
                        taken: TakeResult = take_result(TakeResult, (allowed, tokens, wait))
                        return taken
            finally:
                mutex_unlock(mutex)
        table = self.table
        mutex = table.lock(home)
        try:
            result = self._take(home, tag, encoded, None, capacity, refill_per_second, now)
        finally:
            table.unlock(mutex)
        if result is _NEEDS_MASTER:  # hold the lock across the master's round trip
            with table.hold(home):
                result = self._take(
                    home, tag, encoded, self.overflow, capacity, refill_per_second, now
                )
        return result

    def _take(
        self,
        home: int,
        tag: int,
        key: bytes,
        master: Any,
        capacity: float,
        refill: float,
        now: float | None,
    ) -> Any:
        table = self.table
        at = self._clock() if now is None else now
        entry = table.find(home, tag, key)
        if entry is not None and entry[2] > at:
            index = entry[0]
            tokens, stamp, _ = _BUCKET.unpack(entry[3])
            if at > stamp:
                tokens = min(float(capacity), tokens + (at - stamp) * refill)
                stamp = at
        else:
            # Absent, or full again by now (a full bucket is the same as no bucket).
            if entry is None and table.spilled(home):
                if master is None:
                    return _NEEDS_MASTER
                return master.take(key[1:].decode(), capacity, refill, now)
            index = -1
            if entry is not None:
                index = entry[0]
            elif len(key) + _BUCKET.size <= SLOT_DATA and len(key) <= MAX_KEY:
                index = table.free_slot(home, self._clock())
            if index < 0:
                if master is None:
                    return _NEEDS_MASTER
                table.mark_spilled(home)
                return master.take(key[1:].decode(), capacity, refill, now)
            tokens, stamp = float(capacity), at
        allowed = tokens >= 1.0
        if allowed:
            tokens -= 1.0
        full_at = _full_at(at, capacity - tokens, refill)
        table.write(home, index, tag, key, BUCKET, full_at, _BUCKET.pack(tokens, stamp, full_at))
        return take_result(TakeResult, (allowed, tokens, _wait(tokens, refill)))

    # -- prefixes ------------------------------------------------------------------------------

    def clear_prefix(self, prefix: str) -> int:
        """Remove every value and bucket whose key starts with ``prefix``; how many values."""
        wanted = prefix.encode()
        removed = 0
        for home, index, _key, kind, expires in self._scan(wanted, buckets=True):
            self.table.remove(home, index)
            if kind != BUCKET and expires > self._clock():
                removed += 1
        if self.table.any_spilled:
            removed += int(self.overflow.clear_prefix(prefix))
        return removed

    def count_prefix(self, prefix: str) -> int:
        """How many live values have a key starting with ``prefix``."""
        wanted = prefix.encode()
        now = self._clock()
        count = sum(1 for *_, kind, expires in self._scan(wanted, buckets=False) if expires > now)
        if self.table.any_spilled:
            count += int(self.overflow.count_prefix(prefix))
        return count

    def _scan(self, prefix: bytes, buckets: bool) -> Any:
        """Yield ``(home, index, key, kind, expires)`` of matching entries, each while its
        group is locked (so the caller may remove it)."""
        table = self.table
        for group in range(table.groups):
            if not table.occupied(group):
                continue
            home = group * GROUP_SLOTS
            stripe = table.lock(home)
            try:
                for index, key, kind, expires in table.entries(group):
                    name = key[1:] if kind == BUCKET else key
                    if name.startswith(prefix) and (buckets or kind != BUCKET):
                        yield home, index, key, kind, expires
            finally:
                table.unlock(stripe)

    def _expiry(self, ttl: float | None) -> float:
        if ttl is None:
            return math.inf
        if not ttl > 0:
            raise StateError("ttl must be positive seconds (or None for no expiry)")
        return self._clock() + ttl


def _full_at(at: float, missing: float, refill: float) -> float:
    """When a bucket ``missing`` tokens short is full again (its entry's expiry)."""
    return at if missing <= 0 else (at + missing / refill if refill > 0 else math.inf)


def _wait(tokens: float, refill: float) -> float:
    """Seconds until a bucket holding ``tokens`` has one to give."""
    return 0.0 if tokens >= 1.0 else ((1.0 - tokens) / refill if refill > 0 else math.inf)


def _as_int(kind: int, value: bytes) -> int:
    if kind == INTEGER:
        return int(_INT.unpack(value)[0])
    try:
        return int(value)
    except ValueError:
        raise StateError("incr on a value that is not an integer") from None


def _pack_int(value: int) -> bytes:
    try:
        return _INT.pack(value)
    except struct.error:
        raise StateError("incr result outside the 64-bit range the store keeps") from None
