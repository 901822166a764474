"""The master's inbox: signal handlers only enqueue, and a self-pipe wakes the loop.

Signal handlers run at arbitrary points of the master's code, so they must not act; they
append the signal number to a queue and write a byte to a non-blocking pipe. The loop sleeps
in ``poll()`` on the pipe's read end, so it wakes at once for a signal, for ``push()`` from
another thread (``Master.stop``), and for workers, which inherit the write end and write a
byte when they become ready or ask to be recycled.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from collections import deque
from collections.abc import Iterable
from types import FrameType
from typing import Any

__all__ = ["SignalQueue"]


class SignalQueue:
    """Queued signal numbers plus the wake-up pipe that interrupts the master's sleep."""

    def __init__(self) -> None:
        self._queue: deque[int] = deque()
        self._previous: dict[int, Any] = {}
        self._read_fd, self.notify_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def install(self, signums: Iterable[int]) -> bool:
        """Route ``signums`` here; False (and nothing installed) outside the main thread."""
        try:
            for signum in signums:
                self._previous[signum] = signal.signal(signum, self._on_signal)
        except ValueError:
            self.restore()
            return False
        return True

    def restore(self) -> None:
        """Put back the handlers that were installed before ``install()``."""
        for signum, handler in self._previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signum, handler)
        self._previous.clear()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.push(signum)

    def push(self, signum: int) -> None:
        """Enqueue ``signum`` and wake the loop (safe from any thread or handler)."""
        self._queue.append(signum)
        self.wake()

    def wake(self) -> None:
        """Interrupt ``sleep()`` without enqueuing anything."""
        if self.notify_fd >= 0:
            with contextlib.suppress(OSError):  # full pipe: the loop is awake anyway
                os.write(self.notify_fd, b"s")

    def pop(self) -> int | None:
        """The oldest queued signal, or None."""
        return self._queue.popleft() if self._queue else None

    def sleep(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for a wake-up (not at all if signals are queued)."""
        if self._read_fd < 0:
            return
        if not self._queue:
            poller = select.poll()
            poller.register(self._read_fd, select.POLLIN)
            poller.poll(timeout * 1000)
        with contextlib.suppress(BlockingIOError):
            while os.read(self._read_fd, 4096):
                pass

    def close_reader(self) -> None:
        """In a forked worker: keep only the write end."""
        if self._read_fd >= 0:
            os.close(self._read_fd)
            self._read_fd = -1

    def close(self) -> None:
        """Restore the handlers and close the pipe."""
        self.restore()
        self.close_reader()
        if self.notify_fd >= 0:
            os.close(self.notify_fd)
            self.notify_fd = -1
