"""An answer written piece by piece: socketify.py's `try_end`, `send_chunk` and `on_writable`.

uWebSockets lets a handler write a body of known total size in pieces: `try_end(data,
total_size)` writes what the socket takes and returns `(ok, done)`; when it did not take
everything, `on_writable(handler)` is called with the write offset once the socket drains, and
the handler offers the rest. socketify.py's `await res.send_chunk(data, total_size)` wraps
that into one awaitable.

Here a Socketify Response is written by the connection after the handler returns, so the
pieces go through a `ChunkStream`: the response becomes a stream of `total_size` bytes whose
iterator (`chunks`) the connection pulls in the request's greenlet. Producers add pieces
(`offer`); the iterator hands them to the connection, which writes each one before it asks
for the next, so "written" below means taken by the socket. An `async def` handler keeps
running on the worker's loop while its answer streams; `send_chunk` resumes it once its
piece is written.

Bounds: `offer` refuses a piece while more than `limit` bytes wait (`try_end` then returns
`(False, False)` and the `on_writable` handler is owed a call, as in uWebSockets);
`send_chunk` waits for each piece to be written. A client that leaves stops the iterator:
the stream is then aborted (`res.aborted`, the `on_aborted` handler, waiting `send_chunk`s
get `(False, True)`), when the connection gives the answer up (the Response's close
callbacks) or when the iterator is closed, whichever comes first.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from socketify.core.coroutines import runner

__all__ = ["ChunkStream"]

PENDING_LIMIT = 64 * 1024  # bytes waiting to be written before try_end refuses more


class ChunkStream:
    """The pieces of one answer of `total` bytes, between the handler and the connection."""

    def __init__(self, total: int, limit: int = PENDING_LIMIT) -> None:
        if isinstance(total, bool) or not isinstance(total, int) or total < 0:
            raise ValueError(f"total_size must be a non-negative int, got {total!r}")
        self.total = total
        self.limit = limit
        self.offset = 0  # bytes accepted: uWebSockets' write offset
        self.written = 0  # bytes the connection has written
        self.pending: deque[bytes] = deque()
        self.pending_bytes = 0
        self.owes_writable = False  # an offer was refused: on_writable is to be called
        self.producers_done = False  # nothing but on_writable can add pieces any more
        self.aborted = False
        self.ready: asyncio.Event | None = None  # set (on the loop) when a piece arrives
        self.sent: list[tuple[int, asyncio.Future[tuple[bool, bool]]]] = []
        self.loop: asyncio.AbstractEventLoop | None = None  # where the `send`s wait

    @property
    def done(self) -> bool:
        """True once every byte of the answer was accepted."""
        return self.offset >= self.total

    def offer(self, data: bytes) -> tuple[bool, bool]:
        """Accept `data` unless too much waits already: `(ok, done)` as try_end returns it."""
        if self.aborted or self.done:
            return False, True
        if self.pending_bytes > self.limit and data:
            self.owes_writable = True
            return False, False
        data = data[: self.total - self.offset]  # never more than the Content-Length
        if data:
            self.pending.append(data)
            self.pending_bytes += len(data)
            self.offset += len(data)
        if self.ready is not None:
            self.ready.set()
        return True, self.done

    async def send(self, data: bytes) -> tuple[bool, bool]:
        """Add `data` and wait until it is written: `(ok, done)`, `(False, True)` if aborted."""
        if self.aborted or self.done:
            # A caller that loops without looking at the result still lets the loop run.
            await asyncio.sleep(0)
            return False, True
        data = data[: self.total - self.offset]
        self.pending.append(data)
        self.pending_bytes += len(data)
        self.offset += len(data)
        self.loop = asyncio.get_running_loop()
        written = self.loop.create_future()
        self.sent.append((self.offset, written))
        self.wake()
        return await written

    def wake(self) -> None:
        """Tell a waiting `chunks` that something changed (call on the loop)."""
        if self.ready is not None:
            self.ready.set()

    def finish_producing(self) -> None:
        """The handler is done: pieces still missing can only come from on_writable."""
        self.producers_done = True

    def chunks(
        self, on_writable: Callable[[int], Any], on_aborted: Callable[[], Any]
    ) -> Iterator[bytes]:
        """The pieces as the connection writes them; runs in the request's greenlet."""
        try:
            while self.written < self.total:
                if not self.pending:
                    if on_writable(self.offset):
                        self.owes_writable = False
                    if not self.pending:
                        if self.producers_done:
                            return  # short: the connection cuts the answer
                        runner().run(self.next_piece())
                        continue
                data = self.pending.popleft()
                self.pending_bytes -= len(data)
                yield data
                self.written += len(data)
                if self.sent:
                    runner().run(self.acknowledge())
        finally:
            if self.stop():
                on_aborted()

    def stop(self) -> bool:
        """The answer ended before all of it was written (the client left, the connection
        failed): resume the waiting `send`s with `(False, True)`. True the first time only."""
        if self.aborted or self.written >= self.total:
            return False
        self.aborted = True
        if self.loop is not None:
            # Not `runner().run`: this may run wherever the connection lets the answer go
            # (a close callback, a generator being collected). The thread-safe call writes
            # to the loop's self-pipe, which wakes it wherever it waits.
            self.loop.call_soon_threadsafe(self.settle)
        return True

    async def next_piece(self) -> None:
        """Wait on the loop until a piece arrives or the producers are done."""
        if self.ready is None:
            self.ready = asyncio.Event()
        while not self.pending and not self.producers_done:
            self.ready.clear()
            await self.ready.wait()

    async def acknowledge(self) -> None:
        """`settle`, on the loop."""
        self.settle()

    def settle(self) -> None:
        """Resume the `send`s whose piece is written (all of them, with a failure, if aborted)."""
        keep = []
        for end, future in self.sent:
            if future.done():
                continue
            if self.aborted:
                future.set_result((False, True))
            elif end <= self.written:
                future.set_result((True, end >= self.total))
            else:
                keep.append((end, future))
        self.sent = keep
