"""SIGHUP reloads: zero failed connections under load, and a broken reload keeps the old code."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from tests.support.raw_client import get
from tests.support.wait import wait_for
from tests.workers.master_process import StartMaster

pytestmark = pytest.mark.slow


class Hammer:
    """Threads opening a new connection per request, recording answers and failures."""

    def __init__(self, address: object, threads: int = 3) -> None:
        self.address = address
        self.versions: list[str] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run) for _ in range(threads)]

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                response = get(self.address, "/version", timeout=10)  # type: ignore[arg-type]
                self.versions.append(response.text)
            except (OSError, EOFError) as exc:
                self.failures.append(repr(exc))

    def __enter__(self) -> Hammer:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(15)


@pytest.mark.timeout(40)
def test_hup_under_load_loses_no_connection_and_serves_new_code(launch: StartMaster) -> None:
    master = launch("--workers", "2", "--graceful-timeout", "3")
    old_workers = set(master.workers())
    with Hammer(master.address) as hammer:
        wait_for(lambda: len(hammer.versions) > 50, timeout=10)
        master.version_file.write_text("v2")
        master.signal(signal.SIGHUP)
        wait_for(lambda: "v2" in hammer.versions[-20:], timeout=10)
        wait_for(lambda: not old_workers & set(master.workers()), timeout=10)
        switched = len(hammer.versions)
        wait_for(lambda: len(hammer.versions) > switched + 50, timeout=10)
    assert hammer.failures == []
    assert set(hammer.versions[switched:]) == {"v2"}
    assert len(master.workers()) == 2
    log = master.stderr()
    assert "reload complete: generation 2 serving" in log
    # The old generation was stopped only after every new worker was ready.
    last_new_ready = max(log.index(f"(pid {pid}, generation 2) ready") for pid in master.workers())
    first_old_exit = min(log.index(f"(pid {pid}, generation 1) exited") for pid in old_workers)
    assert last_new_ready < first_old_exit


@pytest.mark.timeout(30)
def test_hup_with_a_broken_new_version_keeps_the_old_workers(launch: StartMaster) -> None:
    master = launch("--workers", "2")
    workers = master.workers()
    master.version_file.write_text("boom: syntax error")
    master.signal(signal.SIGHUP)
    wait_for(lambda: "reload failed" in master.stderr(), timeout=10)
    assert "see the traceback above" in master.stderr()
    time.sleep(0.3)  # would a respawn loop start?
    assert master.workers() == workers
    assert {master.get("/version").text for _ in range(10)} == {"v1"}
    assert master.proc.poll() is None
    # Once fixed, the next reload goes through.
    master.version_file.write_text("v3")
    master.signal(signal.SIGHUP)
    wait_for(lambda: master.get("/version").text == "v3", timeout=10)
    wait_for(lambda: not set(workers) & set(master.workers()), timeout=10)
