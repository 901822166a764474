"""Keeping workers alive: respawn, scaling, heartbeat kills, recycling, and no orphans."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from tests.support.processes import is_alive
from tests.support.wait import wait_for
from tests.workers.master_process import StartMaster

pytestmark = pytest.mark.slow


@pytest.mark.timeout(20)
def test_a_killed_worker_is_respawned_and_the_port_keeps_serving(launch: StartMaster) -> None:
    master = launch("--workers", "2")
    victim, survivor = master.workers()
    os.kill(victim, signal.SIGKILL)

    workers = master.wait_workers(lambda pids: len(pids) == 2 and victim not in pids, 10)
    assert survivor in workers
    answers = {master.get("/pid").text for _ in range(40)}
    assert answers <= {str(pid) for pid in workers}
    assert "exited unexpectedly (signal SIGKILL)" in master.stderr()


@pytest.mark.timeout(25)
def test_ttin_adds_a_worker_and_ttou_removes_one(launch: StartMaster) -> None:
    master = launch("--workers", "1")
    (first,) = master.workers()
    master.signal(signal.SIGTTIN)
    workers = master.wait_workers(lambda pids: len(pids) == 2, timeout=10)
    # Both slots take connections: the kernel spreads them over the two sockets.
    wait_for(
        lambda: {master.get("/pid").text for _ in range(20)} == {str(p) for p in workers},
        timeout=10,
    )
    master.signal(signal.SIGTTOU)
    wait_for(lambda: master.workers() == [first], timeout=10)
    assert {master.get("/pid").text for _ in range(20)} == {str(first)}


@pytest.mark.timeout(25)
def test_a_worker_blocking_its_hub_past_the_timeout_is_killed_and_replaced(
    launch: StartMaster,
) -> None:
    master = launch("--workers", "1", "--timeout", "1.5")
    (blocked,) = master.workers()
    client = threading.Thread(target=lambda: _swallow(master.get, "/block?secs=30", 20))
    client.start()
    wait_for(lambda: not is_alive(blocked), timeout=8)
    (replacement,) = master.wait_workers(lambda pids: len(pids) == 1, timeout=10)
    assert replacement != blocked
    assert master.get("/pid").text == str(replacement)
    assert "timeout 1.5s); killing it" in master.stderr()
    client.join(5)


@pytest.mark.timeout(25)
def test_max_requests_recycles_workers_without_failing_requests(launch: StartMaster) -> None:
    master = launch("--workers", "1", "--max-requests", "3", "--max-requests-jitter", "2")
    seen: set[str] = set()

    def three_generations_seen() -> bool:
        seen.add(master.get("/pid").text)  # raises (failing the test) on any failed request
        return len(seen) >= 3

    wait_for(three_generations_seen, timeout=15, interval=0.02)
    assert "recycling" in master.stderr()
    assert len(master.workers()) >= 1


@pytest.mark.timeout(20)
def test_killing_the_master_takes_its_workers_down_and_frees_the_port(launch: StartMaster) -> None:
    master = launch("--workers", "2")
    workers = master.workers()
    master.proc.kill()
    master.proc.wait(5)
    wait_for(lambda: not any(is_alive(pid) for pid in workers), timeout=5)

    def port_refuses() -> bool:
        try:
            master.get("/", timeout=1)
        except ConnectionRefusedError:
            return True
        except (OSError, EOFError):
            return False
        return False

    wait_for(port_refuses, timeout=5)


def _swallow(call: object, *args: object) -> None:
    try:
        call(*args)  # type: ignore[operator]
    except (OSError, EOFError):
        pass
