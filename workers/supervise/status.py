"""What the master tells an observer (a metrics listener, a health endpoint) about itself.

The master publishes a fresh ``MasterStatus`` after each turn of its loop; it is a frozen value,
so another thread of the master may read the latest one at any time without a lock. An
observer also hears of each worker that ended while the master kept running (why it ended, and
which shared record it held), and runs a hook in each freshly forked worker to drop what only
the master may hold (its own listening socket).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

__all__ = ["ExitReason", "MasterObserver", "MasterStatus", "WorkerStatus"]


class ExitReason(Enum):
    """Why a worker ended while the master kept serving (a restart, in metrics' words)."""

    CRASH = "crash"
    TIMEOUT = "timeout"  # killed after its heartbeat went silent
    MAX_REQUESTS = "max_requests"  # recycled
    RELOAD = "reload"  # replaced by a new generation (HUP, --reload)
    SCALE_DOWN = "scale_down"  # TTOU removed its slot


@dataclass(frozen=True)
class WorkerStatus:
    """One live worker process."""

    slot: int
    pid: int
    generation: int
    record: int  # its index in the master's shared tables
    ready: bool  # it accepts connections
    serving: bool  # it is not leaving (not retiring, not told to stop)


@dataclass(frozen=True)
class MasterStatus:
    """The master's phase and its workers, as of the end of its last loop turn."""

    phase: str  # "new", "booting", "running", "stopping", "stopped"
    reloading: bool  # a reload is starting a new generation
    workers: tuple[WorkerStatus, ...] = ()

    @property
    def accepting(self) -> int:
        """How many workers accept connections and are not leaving."""
        return sum(1 for w in self.workers if w.ready and w.serving)

    @property
    def draining(self) -> bool:
        """Whether a stop or a reload is under way (a load balancer should look elsewhere)."""
        return self.phase != "running" or self.reloading


class MasterObserver(Protocol):
    """Hooks the master calls; each must return quickly and never raise."""

    def on_status(self, status: MasterStatus) -> None:
        """The status after a loop turn."""

    def on_worker_ended(self, worker: WorkerStatus, reason: ExitReason | None) -> None:
        """A worker was reaped; ``reason`` is None when the master itself is stopping."""

    def in_child(self) -> None:
        """Runs in each new worker right after fork."""

    def close(self) -> None:
        """The master is done."""
