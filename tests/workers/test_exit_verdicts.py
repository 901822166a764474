"""`workers.supervise.exits.judge_exit`: what the master makes of a worker's exit, case by case."""

from __future__ import annotations

import pytest

from workers.supervise.exits import BOOT_MESSAGE, Outcome, judge_exit
from workers.supervise.roster import WorkerProc
from workers.supervise.worker import BOOT_FAILED

SIGKILL = -9


def proc(**state: object) -> WorkerProc:
    worker = WorkerProc(pid=42, slot=1, generation=2, record=0, spawned_at=0.0)
    for name, value in state.items():
        setattr(worker, name, value)
    return worker


@pytest.mark.parametrize(
    ("worker", "code", "phase", "outcome", "message"),
    [
        (proc(ready=True), 0, "stopping", Outcome.EXPECTED, "exited (exit code 0)"),
        (proc(ready=True, stop_sent=True), 0, "running", Outcome.EXPECTED, "exited"),
        (proc(), BOOT_FAILED, "booting", Outcome.BOOT_FAILED, BOOT_MESSAGE),
        (proc(timed_out=True), SIGKILL, "booting", Outcome.BOOT_FAILED,
         "worker 1 did not become ready within the timeout"),
        (proc(), SIGKILL, "booting", Outcome.BOOT_FAILED,
         "worker 1 died while booting (signal SIGKILL)"),
        (proc(), BOOT_FAILED, "reloading 2", Outcome.RELOAD_FAILED,
         "reload failed: worker 1 (pid 42, generation 2) could not boot (exit code 3); "
         "see the traceback above; the old workers keep serving"),
        (proc(ready=True), SIGKILL, "running", Outcome.CRASHED,
         "worker 1 (pid 42, generation 2) exited unexpectedly (signal SIGKILL)"),
        (proc(ready=True, timed_out=True), SIGKILL, "running", Outcome.CRASHED,
         "was killed after its heartbeat timed out"),
        (proc(), BOOT_FAILED, "running", Outcome.CRASHED,
         "failed to boot (see the traceback above)"),
    ],
    ids=[
        "master-stopping", "asked-to-stop", "boot-failed", "boot-timed-out", "boot-killed",
        "reload-failed", "crashed", "silent", "respawn-failed-to-boot",
    ],
)  # fmt: skip
def test_exit_is_judged_by_phase_and_worker_state(
    worker: WorkerProc, code: int, phase: str, outcome: Outcome, message: str
) -> None:
    verdict = judge_exit(
        worker,
        code,
        booting=phase == "booting",
        stopping=phase == "stopping",
        reloading=2 if phase == "reloading 2" else None,
    )
    assert verdict.outcome is outcome
    assert message in verdict.message
