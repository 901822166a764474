"""Bounded single-producer/single-consumer rings of length-prefixed records in shared memory.

Theory of operation
-------------------
A ``Ring`` is an anonymous ``MAP_SHARED`` mapping made before ``fork()``, so the parent and
the child see the same pages, plus an eventfd that wakes the reader. Exactly one process
writes and exactly one reads; that is what makes it lock-free without atomic instructions:

- ``head`` (bytes ever written) is stored only by the writer, ``tail`` (bytes ever consumed)
  only by the reader. Both only grow, so ``head - tail`` is the fill level; positions in the
  data area are the counters modulo the capacity. Each is one aligned 8-byte word, read and
  written whole through a ``memoryview`` cast (no torn values).
- A record is a 4-byte little-endian length and the payload, always contiguous: when it does
  not fit before the end of the area, the writer leaves a wrap marker (or, with fewer than 4
  bytes left, nothing) and starts again at offset 0. The writer copies the payload first and
  publishes it by advancing ``head`` last, so a writer killed mid-record leaves nothing
  visible; the reader copies the payload out before advancing ``tail``.
- Waking: a reader that finds the ring empty sets ``waiting`` and checks once more before it
  sleeps on ``notify_fd``; a writer that sees ``waiting`` clears it and writes the eventfd.
  Python gives no memory fence between those two steps, so a reader must bound its sleep
  (``Ring.WAIT_BOUND``): in the rare lost wake-up it is late by that much, never stuck.

Records larger than ``max_record`` (a quarter of the capacity by default, so one always fits
once the reader catches up) raise ``RecordTooLarge``; a ring without room raises ``RingFull``.
Neither call ever blocks: callers wait cooperatively (gevent ``wait_read`` on ``notify_fd``)
or poll, never on a kernel lock.

``multiprocessing.shared_memory`` is deliberately not used: its resource tracker deadlocks
under gevent (gevent issue #2177).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct

__all__ = ["RecordTooLarge", "Ring", "RingError", "RingFull"]

_HEADER = 192  # head, tail and waiting each on their own 64-byte line (no false sharing)
_HEAD, _TAIL, _WAITING = 0, 8, 16  # indexes in the 8-byte word view
_LEN = struct.Struct("<I")
_WRAP = 0xFFFFFFFF  # length value meaning "continue at offset 0"


class RingError(Exception):
    """Base class of the ring's refusals."""


class RingFull(RingError):
    """The ring has no room for the record now; the reader is behind."""


class RecordTooLarge(RingError):
    """The record can never fit in this ring."""


class Ring:
    """One bounded SPSC queue of byte records in memory shared across ``fork()``."""

    WAIT_BOUND = 0.05  # seconds: the longest a reader sleeps before looking again

    def __init__(self, capacity: int = 1 << 20, max_record: int | None = None) -> None:
        if capacity < 64 or capacity % 8:
            raise ValueError("capacity must be a multiple of 8, at least 64 bytes")
        limit = capacity // 4 if max_record is None else max_record
        if not 0 < limit <= capacity // 2 - _LEN.size:
            raise ValueError("max_record must be positive and at most half the capacity")
        self.capacity = capacity
        self.max_record = limit
        self._mem = mmap.mmap(-1, _HEADER + capacity)  # anonymous + MAP_SHARED: survives fork
        self._words = memoryview(self._mem)[:_HEADER].cast("Q")
        self._data = memoryview(self._mem)[_HEADER:]
        self.notify_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)

    # -- writer ------------------------------------------------------------------------------

    def try_put(self, record: bytes | bytearray | memoryview, notify: bool = True) -> None:
        """Append one record; ``RingFull`` when there is no room now, ``RecordTooLarge`` ever.

        ``notify=False`` skips waking the reader (call ``notify()`` after a batch).
        """
        size = len(record)
        if size > self.max_record:
            raise RecordTooLarge(
                f"record of {size} bytes exceeds this ring's limit of {self.max_record} bytes"
            )
        words = self._words
        head = words[_HEAD]
        capacity = self.capacity
        pos = head % capacity
        need = _LEN.size + size
        skip = 0 if capacity - pos >= need else capacity - pos
        free = capacity - (head - words[_TAIL])
        if skip + need > free:
            raise RingFull(
                f"ring full: a {size}-byte record needs {skip + need} bytes, {free} of "
                f"{capacity} are free (the reader is not keeping up)"
            )
        data = self._data
        if skip:
            if skip >= _LEN.size:
                _LEN.pack_into(data, pos, _WRAP)
            pos = 0
        _LEN.pack_into(data, pos, size)
        data[pos + _LEN.size : pos + need] = record
        words[_HEAD] = head + skip + need  # publish last: a crash before this shows nothing
        if notify and words[_WAITING]:
            self.notify()

    def free_bytes(self) -> int:
        """Room left, in bytes (a record also needs 4 bytes of length and maybe a wrap)."""
        words = self._words
        return self.capacity - (words[_HEAD] - words[_TAIL])

    def notify(self) -> None:
        """Wake the reader if it is waiting."""
        if self._words[_WAITING]:
            self._words[_WAITING] = 0
            with contextlib.suppress(BlockingIOError):  # counter saturated: it is awake anyway
                os.eventfd_write(self.notify_fd, 1)

    # -- reader ------------------------------------------------------------------------------

    def try_get(self) -> bytes | None:
        """Remove and return the oldest record, or None when the ring is empty."""
        words = self._words
        tail = words[_TAIL]
        if tail == words[_HEAD]:
            return None
        capacity = self.capacity
        pos = tail % capacity
        data = self._data
        if capacity - pos < _LEN.size:
            tail += capacity - pos
            pos = 0
        (size,) = _LEN.unpack_from(data, pos)
        if size == _WRAP:
            tail += capacity - pos
            pos = 0
            (size,) = _LEN.unpack_from(data, 0)
        start = pos + _LEN.size
        record = bytes(data[start : start + size])
        words[_TAIL] = tail + _LEN.size + size
        return record

    def drain(self, limit: int = 1 << 30) -> list[bytes]:
        """Remove and return up to ``limit`` records, oldest first."""
        out: list[bytes] = []
        get = self.try_get
        while len(out) < limit and (record := get()) is not None:
            out.append(record)
        return out

    def empty(self) -> bool:
        """True when there is nothing to read."""
        words = self._words
        return bool(words[_TAIL] == words[_HEAD])

    def prepare_wait(self) -> bool:
        """Announce that the reader will sleep; False if a record arrived meanwhile.

        Sleep on ``notify_fd`` (at most ``WAIT_BOUND``) only after this returned True.
        """
        self._words[_WAITING] = 1
        if not self.empty():
            self._words[_WAITING] = 0
            return False
        return True

    def clear_notification(self) -> None:
        """Consume a pending wake-up so ``notify_fd`` stops being readable."""
        with contextlib.suppress(BlockingIOError):
            os.eventfd_read(self.notify_fd)

    # -- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        """Unmap and close the eventfd in this process (the other side keeps its own)."""
        if self.notify_fd < 0:
            return
        os.close(self.notify_fd)
        self.notify_fd = -1
        self._words.release()
        self._data.release()
        with contextlib.suppress(BufferError):  # a caller still holds a view: GC unmaps it
            self._mem.close()

    def __repr__(self) -> str:
        words = self._words
        return f"<Ring {words[_HEAD] - words[_TAIL]}/{self.capacity} bytes used>"
