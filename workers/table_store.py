"""The cross-worker store on the shared table, with the master's store for what does not fit.

Theory of operation
-------------------
``TableStore`` offers the operations of ``workers.state`` (get/set/delete/incr/take and the
prefix operations) with the semantics of ``workers.kvstore.KeyValueStore``, but a worker runs
them itself on the ``workers.table.SharedTable`` that every worker maps: a short critical
section under the key's group lock instead of a round trip to the master. What one worker
wrote under the lock, the next one to take it reads (read-your-writes across workers), and
an increment or a token taken is one step under the lock (limits stay global).

A key lives in one place. It goes to the master's store (the *overflow*, a
``workers.state.StateClient``) only when its entry cannot be in the table: a value over
``SLOT_DATA`` bytes, or a group with no free slot. The group is then marked *spilled*, and
from then on every operation on that group also consults the master, while holding the group
lock across the round trip, so the two places never disagree about a key:

- a read that misses the table asks the master;
- a write that lands in the table deletes the master's copy after writing the table;
- a write that goes to the master is acknowledged there before the table's copy is removed.

Both orders leave the previous value winning if the worker dies between the two steps. Groups
that never spilled (nearly all, at the default size) never talk to the master.

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

from workers.link import StateError
from workers.table import GROUP_SLOTS, MAX_KEY, SLOT_DATA, SharedTable

__all__ = ["TableStore"]

BYTES, INTEGER, BUCKET = 0, 1, 2
_BUCKET_KEY = b"\xff"
_INT = struct.Struct("<q")
_BUCKET = struct.Struct("<ddd")  # tokens, stamp, full at
_NEEDS_MASTER: Any = object()  # an operation's answer when only a round trip can decide


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
        encoded = key.encode()
        table = self.table
        home, tag = table.locate(encoded)
        entry = table.read(home, tag, encoded)  # no lock, the usual case (see workers.table)
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
        encoded = key.encode()
        table = self.table
        home, tag = table.locate(encoded)
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
    ) -> tuple[bool, float, float]:
        """Token bucket in one atomic step: ``(allowed, remaining, reset_seconds)``."""
        encoded = _BUCKET_KEY + key.encode()
        table = self.table
        home, tag = table.locate(encoded)
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
        missing = capacity - tokens
        if missing <= 0:
            full_at = at
        elif refill > 0:
            full_at = at + missing / refill
        else:
            full_at = math.inf
        table.write(home, index, tag, key, BUCKET, full_at, _BUCKET.pack(tokens, stamp, full_at))
        if tokens >= 1.0:
            wait = 0.0
        elif refill > 0:
            wait = (1.0 - tokens) / refill
        else:
            wait = math.inf
        return allowed, tokens, wait

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
