"""Per-worker status records in an anonymous shared mapping.

The master creates the table before forking, so every worker inherits the same pages. A worker
writes only its own record; the master only reads (and resets a record before handing it to
a new worker). Nothing here takes a lock: each field has a single writer, and a reader that
races a write sees either the old or the new heartbeat because ``last_beat`` is read until two
reads agree.

Records belong to worker *processes*, not slots: during a reload the old and the new worker of
a slot run side by side, each with its own record. The master allocates and frees records.

``multiprocessing.shared_memory`` is deliberately not used: its resource tracker deadlocks
under gevent.
"""

from __future__ import annotations

import mmap
import struct
import time
from dataclasses import dataclass

__all__ = ["HeartbeatTable", "Record"]

# last_beat (monotonic seconds), requests served, pid, ready flag, retire flag, padding.
_LAYOUT = struct.Struct("=dQiBB2x")
_SIZE = _LAYOUT.size  # 24: keeps each record's float 8-byte aligned
_BEAT = struct.Struct("=d")
_REQUESTS = struct.Struct("=Q")
_PID = struct.Struct("=i")
_OFF_REQUESTS, _OFF_PID, _OFF_READY, _OFF_RETIRE = 8, 16, 20, 21


@dataclass(frozen=True)
class Record:
    """A snapshot of one worker's record."""

    last_beat: float
    requests: int
    pid: int
    ready: bool
    retiring: bool


class HeartbeatTable:
    """A fixed number of worker records in memory shared across fork."""

    def __init__(self, capacity: int = 1024) -> None:
        self.capacity = capacity
        self._mem = mmap.mmap(-1, capacity * _SIZE)  # anonymous + MAP_SHARED: survives fork
        self._free = list(range(capacity - 1, -1, -1))

    # -- master side -------------------------------------------------------------------------

    def allocate(self) -> int:
        """Reserve a record for a worker about to be forked and reset it; LookupError if full."""
        if not self._free:
            raise LookupError(f"heartbeat table full ({self.capacity} workers)")
        index = self._free.pop()
        _LAYOUT.pack_into(self._mem, index * _SIZE, time.monotonic(), 0, 0, 0, 0)
        return index

    def release(self, index: int) -> None:
        """Give a dead worker's record back."""
        self._free.append(index)

    def read(self, index: int) -> Record:
        """Snapshot a record."""
        _, requests, pid, ready, retire = _LAYOUT.unpack_from(self._mem, index * _SIZE)
        return Record(self.last_beat(index), requests, pid, bool(ready), bool(retire))

    def last_beat(self, index: int) -> float:
        """The last heartbeat, in ``time.monotonic()`` seconds (one clock for all processes)."""
        offset = index * _SIZE
        value = _BEAT.unpack_from(self._mem, offset)[0]
        while True:
            again = _BEAT.unpack_from(self._mem, offset)[0]
            if again == value:
                return float(value)
            value = again

    # -- worker side -------------------------------------------------------------------------

    def beat(self, index: int) -> None:
        """Record that the worker is alive now."""
        _BEAT.pack_into(self._mem, index * _SIZE, time.monotonic())

    def set_pid(self, index: int, pid: int) -> None:
        """Record the worker's pid."""
        _PID.pack_into(self._mem, index * _SIZE + _OFF_PID, pid)

    def set_requests(self, index: int, count: int) -> None:
        """Record how many requests the worker has served."""
        _REQUESTS.pack_into(self._mem, index * _SIZE + _OFF_REQUESTS, count)

    def mark_ready(self, index: int) -> None:
        """Record that the worker accepts connections."""
        self._mem[index * _SIZE + _OFF_READY] = 1

    def request_retire(self, index: int) -> None:
        """Ask the master to replace this worker (max_requests reached)."""
        self._mem[index * _SIZE + _OFF_RETIRE] = 1

    def close(self) -> None:
        """Unmap the table (workers keep their own mapping)."""
        self._mem.close()
