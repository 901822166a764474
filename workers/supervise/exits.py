"""What a worker's exit means to the master, decided apart from what the master does about it.

The master reaps a worker and asks ``judge_exit``; the answer is one of four outcomes, each with
the log line that explains it:

- ``EXPECTED``: the worker was told to stop, or the whole master is stopping;
- ``BOOT_FAILED``: it died before becoming ready while the master was starting, so the master
  stops everything instead of respawning an app that cannot import;
- ``RELOAD_FAILED``: a worker of the generation a reload is starting died before becoming
  ready, so the reload is abandoned and the old generation keeps serving;
- ``CRASHED``: anything else; its slot is respawned after a backoff.

Keeping the decision a pure function makes the table above testable without forking.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from workers.supervise.fork import describe_exit
from workers.supervise.roster import WorkerProc
from workers.supervise.worker import BOOT_FAILED

__all__ = ["BOOT_MESSAGE", "ExitVerdict", "Outcome", "judge_exit"]

BOOT_MESSAGE = "worker failed to boot; see the traceback above"


class Outcome(Enum):
    """What the master does about an exit."""

    EXPECTED = "expected"
    BOOT_FAILED = "boot failed"
    RELOAD_FAILED = "reload failed"
    CRASHED = "crashed"


@dataclass(frozen=True)
class ExitVerdict:
    """An outcome and the sentence that explains it (for the log, or for ``BootError``)."""

    outcome: Outcome
    message: str


def judge_exit(
    proc: WorkerProc, code: int, *, booting: bool, stopping: bool, reloading: int | None
) -> ExitVerdict:
    """Classify the exit of ``proc`` with status ``code`` (negative: killed by that signal)."""
    how = describe_exit(code)
    if stopping or proc.stop_sent:
        return ExitVerdict(Outcome.EXPECTED, f"{proc.describe()} exited ({how})")
    if not proc.ready and booting:
        if code == BOOT_FAILED:
            message = BOOT_MESSAGE
        elif proc.timed_out:
            message = f"worker {proc.slot} did not become ready within the timeout"
        else:
            message = f"worker {proc.slot} died while booting ({how})"
        return ExitVerdict(Outcome.BOOT_FAILED, message)
    if not proc.ready and proc.generation == reloading:
        hint = "; see the traceback above" if code == BOOT_FAILED else ""
        message = f"reload failed: {proc.describe()} could not boot ({how}){hint}; "
        return ExitVerdict(Outcome.RELOAD_FAILED, message + "the old workers keep serving")
    if proc.timed_out:
        reason = "was killed after its heartbeat timed out"
    elif code == BOOT_FAILED and not proc.ready:
        reason = "failed to boot (see the traceback above)"
    else:
        reason = f"exited unexpectedly ({how})"
    return ExitVerdict(Outcome.CRASHED, f"{proc.describe()} {reason}")
