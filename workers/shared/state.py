"""The cross-worker key/value store, as a worker sees it: ``workers.shared.state.client()``.

    store = workers.shared.state.client()          # None outside a worker of the pre-fork master
    store.set("sess:42", b"{...}", ttl=86400)
    store.get("sess:42")                    # the same bytes, from any worker
    allowed, remaining, reset = store.take("rl:10.0.0.1", capacity=100, refill_per_second=1.6)

In a worker, ``client()`` is a ``workers.shared.table_store.TableStore``: the worker runs each
operation itself on the hash table every worker maps (``workers.shared.table``), under a short lock,
and only what the table has no room for (values over 4 KiB, its entries written longest ago when
their slots are needed) goes to the master's state server (``workers.shared.state_server``) through
a ``StateClient``. Either way, when a call returns the change is visible to every
worker (read-your-writes across workers) and survives the death of this one. Values are
bytes; keys are ``str``. ``LocalState`` offers the same methods on an in-process
``KeyValueStore`` for a process without a master (``workers=0``, tests), so callers need not
care which they have.

``compare_and_set(key, expected, value, ttl)`` writes only over the value the caller read
(None: only if absent), in one step, and says whether it wrote.

``StateError`` is raised for a refused operation (a non-integer ``incr``, a bad TTL, a value
over the rings' record limit, a store full of values without a TTL); ``StateUnavailable``
when the master does not answer in time.
"""

from __future__ import annotations

import math
from typing import Protocol

from workers.shared import wire
from workers.shared.kvstore import KeyValueStore, TakeResult, take_result
from workers.shared.link import Link, StateError, StateUnavailable
from workers.shared.table_store import TableStore
from workers.shared.wire import Op, Status

__all__ = [
    "LocalState",
    "StateClient",
    "StateError",
    "StateOps",
    "StateUnavailable",
    "client",
    "install",
]

_client: StateOps | None = None


def client() -> StateOps | None:
    """This worker's view of the cross-worker store; None outside a pre-forked worker."""
    return _client


def install(link: Link | None) -> StateOps | None:
    """Set (or with None, clear) this process's client; done by the worker at boot."""
    global _client
    if link is None:
        _client = None
    elif link.table is None:
        _client = StateClient(link)
    else:
        _client = TableStore(link.table, StateClient(link))
    return _client


class StateOps(Protocol):
    """What both ``StateClient`` and ``LocalState`` offer."""

    def get(self, key: str) -> bytes | None: ...
    def set(self, key: str, value: bytes, ttl: float | None = None) -> None: ...
    def compare_and_set(
        self, key: str, expected: bytes | None, value: bytes, ttl: float | None = None
    ) -> bool: ...
    def delete(self, key: str) -> bool: ...
    def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int: ...
    def take(
        self, key: str, capacity: float, refill_per_second: float, now: float | None = None
    ) -> TakeResult: ...
    def clear_prefix(self, prefix: str) -> int: ...
    def count_prefix(self, prefix: str) -> int: ...


class StateClient:
    """Store operations sent to the master over this worker's ``Link``."""

    def __init__(self, link: Link) -> None:
        self._link = link
        self._request = link.request
        # A SET record carries a header, the key and an 8-byte TTL besides the value.
        self.max_value = link.max_record - 512

    def get(self, key: str) -> bytes | None:
        """The value of ``key``, or None when absent or expired."""
        status, body = self._request(Op.GET, key.encode())
        return None if status == Status.MISSING else body

    def set(self, key: str, value: bytes, ttl: float | None = None, *, wait: bool = False) -> None:
        """Store ``value`` under ``key`` for ``ttl`` seconds (None: no expiry).

        ``wait=True`` returns once the master has applied it (not only queued it).
        """
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError("store values are bytes; encode them first")
        if len(value) > self.max_value:
            raise StateError(
                f"a value of {len(value)} bytes exceeds the cross-worker store's limit of "
                f"{self.max_value} bytes"
            )
        args = wire.F64.pack(_ttl(ttl)) + bytes(value)
        if wait:
            self._request(Op.SET, key.encode(), args)
            return
        # Posted, not waited for: the master applies it before answering any request that
        # could have been caused by what this worker does next (see workers.shared.state_server).
        self._link.post(Op.SET, key.encode(), args)

    def compare_and_set(
        self, key: str, expected: bytes | None, value: bytes, ttl: float | None = None
    ) -> bool:
        """Store ``value`` only if the value now is ``expected`` (None: only if absent);
        whether it did (one step in the master)."""
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError("store values are bytes; encode them first")
        size = len(value) + (len(expected) if expected is not None else 0)
        if size > self.max_value:
            raise StateError(
                f"a compare-and-set of {size} bytes exceeds the cross-worker store's limit of "
                f"{self.max_value} bytes"
            )
        args = wire.compare_and_set_args(_ttl(ttl), expected, bytes(value))
        return self._request(Op.COMPARE_AND_SET, key.encode(), args)[1] == b"\x01"

    def delete(self, key: str) -> bool:
        """Remove ``key``; True if it existed."""
        return self._request(Op.DELETE, key.encode())[1] == b"\x01"

    def discard(self, key: str) -> None:
        """Remove ``key``, posted like ``set``: applied before any request this worker's
        next steps could cause is answered, without waiting a round trip here."""
        self._link.post(Op.DELETE, key.encode())

    def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        """Add ``amount`` atomically and return the new value; ``ttl`` applies on creation."""
        args = wire.TTL_AND_AMOUNT.pack(_ttl(ttl), amount)
        return int(wire.I64.unpack(self._request(Op.INCR, key.encode(), args)[1])[0])

    def take(
        self, key: str, capacity: float, refill_per_second: float, now: float | None = None
    ) -> TakeResult:
        """Token bucket in one atomic step: ``(allowed, remaining, reset_seconds)``."""
        args = wire.BUCKET.pack(capacity, refill_per_second, math.nan if now is None else now)
        allowed, left, wait = wire.TAKEN.unpack(self._request(Op.TAKE, key.encode(), args)[1])
        result: TakeResult = take_result(TakeResult, (bool(allowed), left, wait))
        return result

    def clear_prefix(self, prefix: str) -> int:
        """Remove every key starting with ``prefix``; returns how many live values went."""
        return int(wire.I64.unpack(self._request(Op.CLEAR_PREFIX, prefix.encode())[1])[0])

    def count_prefix(self, prefix: str) -> int:
        """How many live keys start with ``prefix``."""
        return int(wire.I64.unpack(self._request(Op.COUNT_PREFIX, prefix.encode())[1])[0])

    def ping(self) -> None:
        """One round trip to the master (raises ``StateUnavailable`` if it does not answer)."""
        self._request(Op.PING, b"")


class LocalState:
    """The same operations on a store inside this process (no master to share with)."""

    def __init__(self, store: KeyValueStore | None = None) -> None:
        self._store = store if store is not None else KeyValueStore()

    def get(self, key: str) -> bytes | None:
        """The value of ``key``, or None when absent or expired."""
        return self._store.get(key.encode())

    def set(self, key: str, value: bytes, ttl: float | None = None, *, wait: bool = False) -> None:
        """Store ``value`` under ``key`` for ``ttl`` seconds (None: no expiry; ``wait`` is
        accepted for ``StateClient``'s sake: here every write is applied at once)."""
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError("store values are bytes; encode them first")
        try:
            self._store.set(key.encode(), bytes(value), ttl)
        except ValueError as exc:
            raise StateError(str(exc)) from None

    def compare_and_set(
        self, key: str, expected: bytes | None, value: bytes, ttl: float | None = None
    ) -> bool:
        """Store ``value`` only if the value now is ``expected`` (None: only if absent)."""
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError("store values are bytes; encode them first")
        try:
            return self._store.compare_and_set(key.encode(), expected, bytes(value), ttl)
        except ValueError as exc:
            raise StateError(str(exc)) from None

    def delete(self, key: str) -> bool:
        """Remove ``key``; True if it existed."""
        return self._store.delete(key.encode())

    def discard(self, key: str) -> None:
        """Remove ``key`` (``StateClient``'s posted delete; here at once)."""
        self._store.delete(key.encode())

    def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        """Add ``amount`` and return the new value; ``ttl`` applies on creation."""
        try:
            return self._store.incr(key.encode(), amount, ttl)
        except ValueError as exc:
            raise StateError(str(exc)) from None

    def take(
        self, key: str, capacity: float, refill_per_second: float, now: float | None = None
    ) -> TakeResult:
        """Token bucket in one step: ``(allowed, remaining, reset_seconds)``."""
        try:
            return self._store.take(key.encode(), capacity, refill_per_second, now)
        except ValueError as exc:  # full of values without a TTL
            raise StateError(str(exc)) from None

    def clear_prefix(self, prefix: str) -> int:
        """Remove every key starting with ``prefix``."""
        return self._store.clear_prefix(prefix.encode())

    def count_prefix(self, prefix: str) -> int:
        """How many live keys start with ``prefix``."""
        return self._store.count_prefix(prefix.encode())


def _ttl(ttl: float | None) -> float:
    if ttl is None:
        return wire.NO_TTL
    if not ttl > 0:
        raise StateError("ttl must be positive seconds (or None for no expiry)")
    return float(ttl)
