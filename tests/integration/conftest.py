"""Fixtures that run the real `socketify run module:attr --bind ... --workers N` on a free port.

`serve(...)` (per test) and the module-scoped `basic_server` start the command, wait until the
address answers HTTP, and at teardown stop it with SIGTERM: a server that does not exit within
STOP_TIMEOUT, or leaves worker processes behind, fails the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from integration_support import Launcher, ServerProcess


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Launcher]:
    """Start `socketify run` servers for one test; each is SIGTERMed at teardown."""
    launcher = Launcher(tmp_path)
    yield launcher
    problems = launcher.stop_all()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture(scope="module")
def basic_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`socketify run apps.basic:server --workers 1`, shared by a module's tests."""
    launcher = Launcher(tmp_path_factory.mktemp("basic"))
    server = launcher()
    yield server
    problems = launcher.stop_all()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
