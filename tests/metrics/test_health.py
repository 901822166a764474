"""Liveness and readiness verdicts, from the master's status alone."""

from __future__ import annotations

from socketify.metrics.health import liveness, readiness
from workers.supervise.status import MasterStatus, WorkerStatus


def worker(slot: int, *, ready: bool = True, serving: bool = True) -> WorkerStatus:
    return WorkerStatus(slot, 1000 + slot, 1, slot, ready, serving)


RUNNING = MasterStatus("running", False, (worker(0), worker(1)))


def test_a_running_master_with_accepting_workers_is_live_and_ready() -> None:
    assert liveness(RUNNING).status == 200
    assert readiness(RUNNING, None).status == 200
    assert readiness(RUNNING, True).status == 200


def test_readiness_refuses_while_stopping_or_reloading_but_liveness_holds() -> None:
    stopping = MasterStatus("stopping", False, (worker(0, serving=False),))
    reloading = MasterStatus("running", True, (worker(0), worker(1, ready=False)))
    assert readiness(stopping, None).reason == "draining (stopping)"
    assert readiness(reloading, None).reason == "draining (reloading)"
    assert liveness(stopping).status == 200
    assert liveness(reloading).status == 200


def test_readiness_refuses_without_an_accepting_worker_or_with_the_backend_down() -> None:
    booting = MasterStatus("running", False, (worker(0, ready=False),))
    assert readiness(booting, None).status == 503
    assert readiness(RUNNING, False).reason == "state backend down"


def test_liveness_fails_without_any_worker_process_or_once_stopped() -> None:
    assert liveness(MasterStatus("running", False, ())).status == 503
    assert liveness(MasterStatus("stopped", False, ())).status == 503
