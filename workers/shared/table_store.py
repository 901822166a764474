"""The cross-worker store on the shared table, with the master's store as its slow tier.

Theory of operation
-------------------
``TableStore`` offers the operations of ``workers.shared.state`` (get/set/compare_and_set/delete/
incr/take and the prefix operations) with the semantics of ``workers.shared.kvstore.KeyValueStore``,
but a worker runs them itself on the ``workers.shared.table.SharedTable`` that every worker maps: a
short critical section under the key's lock instead of a round trip to the master. What one
worker wrote under the lock, the next one to take it reads (read-your-writes across
workers), and an increment, a compare-and-set or a token taken is one step under the lock
(limits stay global).

Capacity: two tiers. The table is the fast tier, for what was written lately; the master's
store (the *overflow*, a ``workers.shared.state.StateClient``) is the slow tier behind it, and
together they are the store. Neither drops a live entry early. An expired entry's slot is
reused (token buckets count as expired once they would be full again, which is the same as
no bucket). A new or growing entry whose groups are full of live entries takes the place of
the one there written longest ago (one with a TTL before one without), which is *demoted*:
moved to the master's store with its remaining TTL, never lost. A session is written on
every request, so the entries demoted are those not used for longest, and a hot user who
arrives after a flood of anonymous ones is served from the table like the rest. The master's
store is bounded in bytes; only when it is full does it evict, the entries with a TTL written
longest ago first, and as the table demotes its oldest first, the store as a whole lets its
oldest sessions go first. Token buckets are never demoted (the master cannot take one over
mid-count); a value too big for any slot (over 4 KiB) lives in the master, and so does a key
whose groups hold nothing that may be demoted. When the master is full of values without a
TTL, the entry that would be demoted is evicted if it has a TTL.

A key lives in one place. When one of a group's keys goes to the master, the key's class-0
group is marked *spilled* (values and buckets apart), and from then on every operation on a
key of that group that misses the table also consults the master, while holding the group's
lock across the round trip, so the two places never disagree about a key:

- a read that misses the table asks the master;
- a write that lands in the table deletes the master's copy after writing the table (posted,
  see ``_store``): so a key read from the master is *promoted* back into the table by its
  next write;
- a demotion, or a write that goes to the master, is acknowledged there before the table's
  copy is removed; the spilled mark comes first, so a lock-free reader who misses the table
  asks the master.

Either order leaves a whole value, old or new, if the worker dies between the two steps (a
delete removes both copies). Groups that never spilled never talk to the master. The master
bounds its own store too (``workers.shared.kvstore``); a value it cannot take raises
``StateError``.

Token-bucket keys are the key behind a 0xFF byte, which no UTF-8 key starts with, so a bucket
and a value of the same name stay apart as in ``KeyValueStore``.
"""

from __future__ import annotations

import math
import struct
import time
from collections.abc import Callable
from typing import Any

from workers.shared.kvstore import TakeResult, take_result, token_wait
from workers.shared.link import StateError, StateUnavailable
from workers.shared.table import Entry, Place, SharedTable, Stored
from workers.shared.table_upkeep import remove_where, select

__all__ = ["TableStore"]

BYTES, INTEGER, BUCKET = 0, 1, 2
_DEMOTABLE = frozenset((BYTES, INTEGER))  # what the master's store can take over
VALUES_SPILLED, BUCKETS_SPILLED = 1, 2  # a group's spilled marks (``SharedTable.spilled``)
_BUCKET_KEY = b"\xff"
_INT = struct.Struct("<q")
_BUCKET = struct.Struct("<ddd")  # tokens, stamp, full at
_PLACES_MAX = 8192  # keys whose place a store remembers (forgotten all at once past this)


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
        # PERF: a client sends the same session id, its address, again and again; where its
        # key lives (hash, groups, lock) is worked out once, not per operation.
        self._places: dict[str, Place] = {}
        self._bucket_places: dict[str, Place] = {}

    def _place(self, key: str) -> Place:
        place = self._places.get(key)
        if place is None:
            if len(self._places) >= _PLACES_MAX:
                self._places.clear()
            place = self._places[key] = self.table.place(key.encode())
        return place

    def _bucket_place(self, key: str) -> Place:
        place = self._bucket_places.get(key)
        if place is None:
            if len(self._bucket_places) >= _PLACES_MAX:
                self._bucket_places.clear()
            place = self._bucket_places[key] = self.table.place(_BUCKET_KEY + key.encode())
        return place

    # -- values ------------------------------------------------------------------------------

    def get(self, key: str) -> bytes | None:
        """The value of ``key``, or None when absent or expired."""
        place = self._places.get(key) or self._place(key)
        table = self.table
        entry = table.read(place)  # no lock, the usual case (see workers.shared.table)
        if entry is not None:
            if entry.expires <= self._clock():
                return None
            return entry.value if entry.kind == BYTES else _digits(entry.value)
        if not table.spilled(place):
            return None
        with table.locked(place):
            return self._current(place, table.find(place))

    def _current(self, place: Place, entry: Entry | None) -> bytes | None:
        """The key's value wherever it is (with the lock; ``entry``: the table's)."""
        if entry is not None:
            if entry.expires <= self._clock():
                return None
            return entry.value if entry.kind == BYTES else _digits(entry.value)
        if self.table.spilled(place):
            value: bytes | None = self.overflow.get(place.key.decode())
            return value
        return None

    def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        """Store ``value`` under ``key`` for ``ttl`` seconds (None: no expiry)."""
        if value.__class__ is not bytes:
            value = _as_bytes(value)
        now = self._clock()
        expires = _expiry(now, ttl)
        place = self._places.get(key) or self._place(key)
        table = self.table
        if table.rewrite(place, BYTES, expires, value, now):
            return  # the usual case, in one step (the key in the table has no master copy)
        with table.locked(place):
            self._store(place, table.find(place), BYTES, expires, value)

    def compare_and_set(
        self, key: str, expected: bytes | None, value: bytes, ttl: float | None = None
    ) -> bool:
        """Store ``value`` only if the value now is ``expected`` (None: only if absent);
        whether it did, in one step under the key's lock."""
        if value.__class__ is not bytes:
            value = _as_bytes(value)
        now = self._clock()
        expires = _expiry(now, ttl)
        place = self._places.get(key) or self._place(key)
        table = self.table
        if expected is not None:
            done = table.rewrite(place, BYTES, expires, value, now, expected)
            if done is not None:
                return done  # the usual case, in one step
        with table.locked(place):
            found = table.find(place)
            if self._current(place, found) != expected:
                return False
            self._store(place, found, BYTES, expires, value)
            return True

    def _store(
        self, place: Place, found: Entry | None, kind: int, expires: float, value: bytes
    ) -> None:
        """Write the key's entry in the table, else in the master (with the lock)."""
        table = self.table
        # A key found in the table has no copy in the master (one place per key).
        spilled = found is None and table.spilled(place)
        now = self._clock()
        if table.put(place, found, kind, expires, value, now, self._demote, _DEMOTABLE):
            if spilled:
                # A copy there would resurface. Posted, not waited for: the master applies it
                # before any request that another worker's next step on this key makes, and
                # that worker takes this lock first (see ``workers.shared.state_server``).
                self.overflow.discard(place.key.decode())
            return
        table.mark_spilled(place)
        if kind == INTEGER:
            value = str(_INT.unpack(value)[0]).encode()  # the master keeps the digits
        ttl = None if expires == math.inf else expires - now
        if ttl is not None and ttl <= 0:
            self.overflow.delete(place.key.decode())  # already expired: nothing to keep
        else:
            self.overflow.set(place.key.decode(), value, ttl, wait=True)
        if found is not None:
            table.remove(place, found)

    def _demote(self, key: bytes, entry: Entry) -> bool:
        """Keep ``key``'s entry in the master's store, as the table makes room for a newer
        one in its slot (with the lock its groups share); whether it may go."""
        table = self.table
        table.mark_spilled(key)  # first: a reader who misses it asks the master
        value = entry.value if entry.kind == BYTES else _digits(entry.value)
        ttl = None if entry.expires == math.inf else entry.expires - self._clock()
        if ttl is not None and ttl <= 0:
            return True  # expired meanwhile: nothing to keep
        try:
            self.overflow.set(key.decode(), value, ttl, wait=True)
        except StateUnavailable:
            raise
        except StateError:  # the master is full of values without a TTL: the store is full
            # Evicted if it has a TTL, as the master would its own oldest with one.
            return ttl is not None
        return True

    def delete(self, key: str) -> bool:
        """Remove ``key``; True if it existed."""
        place = self._place(key)
        table = self.table
        with table.locked(place):
            found = table.find(place)
            spilled = table.spilled(place)
            existed = False
            if found is not None:
                table.remove(place, found)
                existed = found.expires > self._clock()
            if spilled:  # a worker that died demoting it may have left a copy there too
                existed = bool(self.overflow.delete(key)) or existed
            return existed

    def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        """Add ``amount`` atomically and return the new value; ``ttl`` applies on creation."""
        expires = self._expiry(ttl)
        place = self._place(key)
        table = self.table
        with table.locked(place):
            found = table.find(place)
            if found is not None and found.expires > self._clock():
                total = _as_int(found.kind, found.value) + amount
                self._store(place, found, INTEGER, found.expires, _pack_int(total))
                return total
            if found is None and table.spilled(place):
                return int(self.overflow.incr(key, amount, ttl))
            self._store(place, found, INTEGER, expires, _pack_int(amount))
            return amount

    # -- token buckets -------------------------------------------------------------------------

    def take(
        self, key: str, capacity: float, refill_per_second: float, now: float | None = None
    ) -> TakeResult:
        """Token bucket in one atomic step: ``(allowed, remaining, reset_seconds)``."""
        place = self._bucket_places.get(key) or self._bucket_place(key)
        table = self.table
        with table.locked(place):
            clock = self._clock()
            at = clock if now is None else now
            found = table.find(place)
            if found is not None and found.expires > at:
                tokens, stamp, _ = _BUCKET.unpack(found.value)
                if at > stamp:
                    tokens = min(float(capacity), tokens + (at - stamp) * refill_per_second)
                    stamp = at
            elif found is None and table.spilled(place, BUCKETS_SPILLED):
                result: TakeResult = self.overflow.take(key, capacity, refill_per_second, now)
                return result
            else:  # absent, or full again by now (a full bucket is the same as no bucket)
                tokens, stamp = float(capacity), at
            allowed = tokens >= 1.0
            if allowed:
                tokens -= 1.0
            # When the bucket is full again: its entry's expiry (a full bucket is no bucket).
            if tokens >= capacity:
                full_at = at
            elif refill_per_second > 0:
                full_at = at + (capacity - tokens) / refill_per_second
            else:
                full_at = math.inf
            bucket = _BUCKET.pack(tokens, stamp, full_at)
            if not table.put(
                place, found, BUCKET, full_at, bucket, clock, self._demote, _DEMOTABLE
            ):
                # No room for a new bucket: the master keeps it (the same answer, from there).
                table.mark_spilled(place, BUCKETS_SPILLED)
                if found is not None:
                    table.remove(place, found)
                result = self.overflow.take(key, capacity, refill_per_second, now)
                return result
        wait = token_wait(tokens, refill_per_second)
        taken: TakeResult = take_result(TakeResult, (allowed, tokens, wait))
        return taken

    # -- prefixes ------------------------------------------------------------------------------

    def clear_prefix(self, prefix: str) -> int:
        """Remove every value and bucket whose key starts with ``prefix``; how many values."""
        wanted = prefix.encode()
        removed = remove_where(self.table, lambda stored: _name(stored).startswith(wanted))
        now = self._clock()
        count = sum(1 for stored in removed if stored.kind != BUCKET and stored.expires > now)
        if self.table.any_spilled:
            count += int(self.overflow.clear_prefix(prefix))
        return count

    def count_prefix(self, prefix: str) -> int:
        """How many live values have a key starting with ``prefix``."""
        wanted = prefix.encode()
        now = self._clock()
        count = len(
            select(
                self.table,
                lambda stored: (
                    stored.kind != BUCKET and stored.expires > now and stored.key.startswith(wanted)
                ),
            )
        )
        if self.table.any_spilled:
            count += int(self.overflow.count_prefix(prefix))
        return count

    def _expiry(self, ttl: float | None) -> float:
        return _expiry(self._clock(), ttl)


def _expiry(now: float, ttl: float | None) -> float:
    """When an entry written at ``now`` with ``ttl`` expires."""
    if ttl is None:
        return math.inf
    if not ttl > 0:
        raise StateError("ttl must be positive seconds (or None for no expiry)")
    return now + ttl


def _digits(packed: bytes) -> bytes:
    """What ``get`` answers for a counter."""
    return str(_INT.unpack(packed)[0]).encode()


def _name(stored: Stored) -> bytes:
    """The key a caller gave (a bucket's without its 0xFF byte)."""
    return stored.key[1:] if stored.kind == BUCKET else stored.key


def _as_bytes(value: Any) -> bytes:
    if value.__class__ is bytes:
        return value
    if not isinstance(value, bytes | bytearray | memoryview):
        raise TypeError("store values are bytes; encode them first")
    return bytes(value)


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
