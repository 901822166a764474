"""Fixtures for the systemd tests: the fake notification socket, and the helpers' folders.

The servers are the real `socketify run`, started by the integration tests' launcher (or by
`systemd-socket-activate`); `tests/` is on sys.path for `services`, `tests/integration` for
the launcher and `apps.basic`, this folder for `systemd_app`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/services.py
# The launcher and wire helpers of the integration tests; their folder is a rootdir of its
# own (no __init__.py), so it is only on sys.path when pytest collects it.
sys.path.insert(0, str(HERE.parent / "integration"))

from integration_support import Launcher  # noqa: E402
from systemd_support import NotifyListener  # noqa: E402


@pytest.fixture
def notify() -> Iterator[NotifyListener]:
    """A fresh fake systemd notification socket; put `notify.path` in $NOTIFY_SOCKET."""
    listener = NotifyListener()
    yield listener
    listener.close()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Launcher]:
    """Start `socketify run` servers for one test; each is SIGTERMed at teardown."""
    launcher = Launcher(tmp_path)
    yield launcher
    problems = launcher.stop_all()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
