"""Liveness and readiness, decided from the master's status and the workers' tallies.

`/healthz` answers "restart me?": 200 while the master runs and at least one worker process
lives. `/readyz` answers "send me traffic?": 200 only when a worker accepts, no stop or reload
is draining, and every worker sees its state backend (the Redis breaker) up, if one is used.
"""

from __future__ import annotations

from dataclasses import dataclass

from workers.supervise.status import MasterStatus

__all__ = ["Verdict", "liveness", "readiness"]


@dataclass(frozen=True)
class Verdict:
    """An HTTP status and the one line that explains it."""

    status: int
    reason: str


def liveness(status: MasterStatus) -> Verdict:
    """`/healthz`."""
    if status.phase in ("stopped", "new"):
        return Verdict(503, f"master {status.phase}")
    if not status.workers:
        return Verdict(503, "no worker process")
    return Verdict(200, "ok")


def readiness(status: MasterStatus, backend_up: bool | None) -> Verdict:
    """`/readyz`; `backend_up` is None when no state backend reports."""
    if status.draining:
        why = "reloading" if status.reloading else status.phase
        return Verdict(503, f"draining ({why})")
    if not status.accepting:
        return Verdict(503, "no worker accepts connections")
    if backend_up is False:
        return Verdict(503, "state backend down")
    return Verdict(200, "ok")
