"""tests/support/serve.py and wait.py must be able to fail, or the tests built on them would
pass blindly."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.serve import SOCKETIFY, Launcher, ServerProcess
from tests.support.wait import wait_for

pytestmark = pytest.mark.timeout(60)


def test_wait_for_helper_reports_timeouts() -> None:
    # The harness itself must be able to fail, or every "wait until" above would pass blindly.
    with pytest.raises(AssertionError, match="timed out"):
        wait_for(lambda: False, 0.1)


def test_server_process_reports_a_server_that_exits_during_boot(tmp_path: Path) -> None:
    server = ServerProcess(
        [SOCKETIFY, "run", "tests.integration.apps.broken:server", "--workers", "1",
         "--bind", f"127.0.0.1:{free_port()}"],
        log_path=tmp_path / "log",
        address=("127.0.0.1", 1),
    )  # fmt: skip
    with pytest.raises(AssertionError, match="server exited"):
        server.wait_listening(10)
    assert server.stop() == []


def test_teardown_reports_a_server_that_ignores_sigterm(tmp_path: Path) -> None:
    launcher = Launcher(tmp_path)
    server = launcher()
    server.signal(signal.SIGSTOP)  # a stopped master cannot act on SIGTERM
    problems = launcher.stop_all(timeout=1.0)
    assert problems and "did not exit within 1.0s of SIGTERM" in problems[0]
    assert server.proc.poll() is not None  # and it was killed, not left behind
    wait_for(lambda: not server.group(), 5, message="its workers to exit")


def test_teardown_reports_and_kills_processes_left_in_the_group(tmp_path: Path) -> None:
    launcher = Launcher(tmp_path)
    # A master that exits on SIGTERM and leaves a child behind, as a lost worker would.
    leaver = launcher.spawn(["/bin/sh", "-c", "sleep 30 & exec sleep 30"], ("127.0.0.1", 1))
    wait_for(lambda: len(leaver.group()) == 2, 5, message="both processes to start")
    problems = launcher.stop_all(timeout=5)
    assert problems and "left processes running" in problems[0]
    assert leaver.group() == []
