"""Room broadcasts bigger than one bus message: sent in parts, joined again by each receiver.

The worker bus carries records of at most `bus.max_payload` bytes (a little under 1 MiB),
while a broadcast may be bigger (a Pulse message up to `max_message_bytes`, 1 MiB by default;
an SSE event of any size). A payload over the limit goes out as numbered parts, each tagged
with the publisher's pid and a message number; every receiver, the publisher's own process
included, joins the parts and handles the whole. The parts of one message travel on one
channel from one publisher, so they arrive in order and before anything that publisher sends
on that channel afterwards: the whole keeps its place in the publisher's order. A bus without
a limit (Redis, the in-process bus) never sees parts.

The payloads of `socketify.realtime.rooms` start with the length of a member id, always
under 255, so the byte 255 marks a part.
"""

from __future__ import annotations

import itertools
import os
import struct
import time
from typing import Any

__all__ = ["PART_MARK", "PartJoiner", "publish"]

PART_MARK = 0xFF
_HEADER = struct.Struct(">BIQII")  # mark, publisher pid, message number, part index, count
STALE_SECONDS = 30.0  # parts of a message whose rest never came (a dropped record) expire
_numbers = itertools.count(1)


def publish(bus: Any, channel: str, payload: bytes) -> None:
    """Publish `payload` on `channel`, in parts when it is over the bus's record limit."""
    limit = getattr(bus, "max_payload", None)
    if limit is None or len(payload) <= limit:
        bus.publish(channel, payload)
        return
    size = limit - _HEADER.size
    count = -(-len(payload) // size)
    number = next(_numbers)
    pid = os.getpid()
    view = memoryview(payload)
    for index in range(count):
        part = view[index * size : (index + 1) * size]
        bus.publish(channel, _HEADER.pack(PART_MARK, pid, number, index, count) + part)


class PartJoiner:
    """Joins the parts of each message; `add` returns the whole once its last part is in."""

    def __init__(self) -> None:
        self._pending: dict[tuple[int, int], tuple[float, list[bytes]]] = {}

    def add(self, record: bytes) -> bytes | None:
        """Take one part; the whole payload when complete, else None."""
        _, pid, number, index, count = _HEADER.unpack_from(record)
        key = (pid, number)
        data = record[_HEADER.size :]
        if index == 0:
            self._expire()
            if count == 1:
                return data
            self._pending[key] = (time.monotonic(), [data])
            return None
        entry = self._pending.get(key)
        if entry is None or len(entry[1]) != index:
            self._pending.pop(key, None)  # a part went missing: the message is lost
            return None
        entry[1].append(data)
        if index + 1 < count:
            return None
        del self._pending[key]
        return b"".join(entry[1])

    def _expire(self) -> None:
        cutoff = time.monotonic() - STALE_SECONDS
        for key, (started, _) in list(self._pending.items()):
            if started < cutoff:
                del self._pending[key]
