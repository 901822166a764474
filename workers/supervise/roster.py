"""The master's bookkeeping: which worker processes exist, and respawn backoff per slot."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Backoff", "Roster", "WorkerProc"]


@dataclass(eq=False)
class WorkerProc:
    """One forked worker as the master sees it."""

    pid: int
    slot: int
    generation: int
    record: int  # its HeartbeatTable record
    spawned_at: float
    ready: bool = False
    retiring: bool = False  # asked to be replaced (max_requests); still serving meanwhile
    stop_sent: bool = False  # TERM/QUIT sent: its exit is expected, never respawned
    kill_at: float | None = None  # when to SIGKILL it if it has not exited
    killed: bool = False  # SIGKILL sent
    timed_out: bool = False  # killed because its heartbeat went silent

    @property
    def serving(self) -> bool:
        """Whether it counts as its slot's worker (not leaving for any reason)."""
        return not (self.retiring or self.stop_sent or self.killed)

    def send(self, signum: int) -> None:
        """Send a signal, ignoring a process that has just exited."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def stop(self, graceful: bool, deadline: float) -> None:
        """Ask it to stop (TERM drains, QUIT drops); it must be gone by ``deadline``."""
        self.send(signal.SIGTERM if graceful else signal.SIGQUIT)
        self.stop_sent = True
        self.kill_at = deadline if self.kill_at is None else min(self.kill_at, deadline)

    def kill(self) -> None:
        """SIGKILL it."""
        self.killed = True
        self.send(signal.SIGKILL)

    def describe(self) -> str:
        """A short label for log lines."""
        return f"worker {self.slot} (pid {self.pid}, generation {self.generation})"


class Roster:
    """Live worker processes by pid."""

    def __init__(self) -> None:
        self._by_pid: dict[int, WorkerProc] = {}

    def add(self, proc: WorkerProc) -> None:
        """Track a freshly forked worker."""
        self._by_pid[proc.pid] = proc

    def pop(self, pid: int) -> WorkerProc | None:
        """Forget a reaped worker."""
        return self._by_pid.pop(pid, None)

    def __iter__(self) -> Iterator[WorkerProc]:
        return iter(list(self._by_pid.values()))

    def __len__(self) -> int:
        return len(self._by_pid)

    def in_slot(self, slot: int) -> list[WorkerProc]:
        """All workers of a slot, whatever their generation or state."""
        return [p for p in self._by_pid.values() if p.slot == slot]

    def serving(self, slot: int, generation: int) -> list[WorkerProc]:
        """The workers that cover ``slot`` for ``generation`` (booting or ready)."""
        return [
            p
            for p in self._by_pid.values()
            if p.slot == slot and p.generation == generation and p.serving
        ]


class Backoff:
    """Exponential respawn delay per slot; a worker that stayed up long enough resets it.

    The first crash is respawned at once (a rare crash should not cost capacity); repeated
    quick crashes wait 0.1 s, 0.2 s, 0.4 s ... up to ``cap``.
    """

    def __init__(self, *, first: float = 0.1, cap: float = 10.0, reset_after: float = 10.0):
        self.first, self.cap, self.reset_after = first, cap, reset_after
        self._failures: dict[int, int] = {}
        self._not_before: dict[int, float] = {}

    def failed(self, slot: int, *, uptime: float, now: float) -> float:
        """Record that the worker of ``slot`` died after ``uptime`` seconds; returns the delay."""
        failures = 0 if uptime >= self.reset_after else self._failures.get(slot, 0)
        failures += 1
        self._failures[slot] = failures
        delay = 0.0 if failures == 1 else min(self.first * 2 ** (failures - 2), self.cap)
        self._not_before[slot] = now + delay
        return delay

    def ready(self, slot: int, now: float) -> bool:
        """Whether ``slot`` may be respawned now."""
        return now >= self._not_before.get(slot, 0.0)

    def waiting(self, now: float) -> bool:
        """Whether any slot is still inside its delay."""
        return any(now < when for when in self._not_before.values())

    def forget(self, slot: int) -> None:
        """Drop the history of a removed slot."""
        self._failures.pop(slot, None)
        self._not_before.pop(slot, None)
