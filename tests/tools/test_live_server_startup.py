"""`socketify.testing.LiveServer` hands the server over only once every worker serves."""

from __future__ import annotations

import http.client
from pathlib import Path

import pytest

from socketify.testing import LiveServer
from tests.support.serve import REPO

pytestmark = pytest.mark.timeout(60)

APP = "tests.support.apps.slow_boot:server"


def test_start_returns_once_the_workers_have_imported_a_slow_app() -> None:
    # The master binds the port long before its workers have imported this app (3 s each);
    # a client of a freshly started LiveServer must not be the one that waits for that.
    # The repository root is the working directory, where the app is found (as users run it).
    with LiveServer(APP, workers=2, cwd=str(REPO), env={"SLOW_BOOT_SECONDS": "3"}) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=2.0)
        connection.request("GET", "/ping")
        answer = connection.getresponse()
        assert answer.status == 200, server.log()
        assert answer.read().startswith(b"pong ")
        connection.close()


def test_start_still_works_when_the_startup_line_goes_elsewhere(tmp_path: Path) -> None:
    args = ("--error-log", str(tmp_path / "error.log"))
    with LiveServer(APP, args=args, cwd=str(REPO)) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10.0)
        connection.request("GET", "/ping")
        assert connection.getresponse().status == 200
        connection.close()
    assert "listening on" in (tmp_path / "error.log").read_text()
