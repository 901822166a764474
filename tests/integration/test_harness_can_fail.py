"""The harness itself must be able to fail, or the tests built on it would pass blindly."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from integration_support import Launcher, ServerProcess, free_port, wait_for

pytestmark = pytest.mark.timeout(60)


def test_wait_for_helper_reports_timeouts() -> None:
    # The harness itself must be able to fail, or every "wait until" above would pass blindly.
    with pytest.raises(AssertionError, match="timed out"):
        wait_for(lambda: False, 0.1)


def test_server_process_reports_a_server_that_exits_during_boot(tmp_path: Path) -> None:
    server = ServerProcess(
        ["run", "apps.broken:server", "--workers", "1", "--bind", f"127.0.0.1:{free_port()}"],
        log_path=tmp_path / "log",
        address=("127.0.0.1", 1),
    )
    with pytest.raises(AssertionError, match="server exited"):
        server.wait_listening(10)
    server.stop()


def test_teardown_reports_a_server_that_ignores_sigterm(tmp_path: Path) -> None:
    launcher = Launcher(tmp_path)
    server = launcher()
    server.signal(signal.SIGSTOP)  # a stopped master cannot act on SIGTERM
    problems = launcher.stop_all(timeout=1.0)
    assert problems and "did not exit within 1.0s of SIGTERM" in problems[0]
    assert server.proc.poll() is not None  # and it was killed, not left behind
    wait_for(lambda: not server.group(), 5, message="its workers to exit")
