"""Fixtures every test folder may use; the helpers behind them live in `tests/support/`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.browser import chromium
from tests.support.sd_notify import NotifyListener
from tests.support.serve import Launcher

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Launcher]:
    """Start real `socketify run` servers for one test; each is SIGTERMed at teardown, and a
    server that hangs on stop or leaves workers behind fails the test."""
    with Launcher(tmp_path) as launcher:
        yield launcher


@pytest.fixture
def notify() -> Iterator[NotifyListener]:
    """A fresh fake systemd notification socket; put `notify.path` in $NOTIFY_SOCKET."""
    listener = NotifyListener()
    yield listener
    listener.close()


@pytest.fixture
def browser() -> Iterator[Browser]:
    """A headless Chromium (Playwright on Debian's chromium) for one test; skips, or fails when
    services are required, without one."""
    with chromium() as launched:
        yield launched


# -- markers ----------------------------------------------------------------------------------
# `browser` and `live` are given here from what a test uses, so a new test is marked without
# anyone remembering to; `slow` is written on the modules that need it. The contributors' fast
# loop leaves all three out: python -m pytest -m "not slow and not browser and not live".

LIVE_FIXTURES = {"serve", "live_server"}
# A module that starts processes itself: `socketify run` through tests.support.serve, the
# in-process LiveServer, or any other program through subprocess.
STARTS_PROCESSES = re.compile(r"\b(tests\.support\.serve|LiveServer|subprocess)\b")


@cache
def _starts_processes(path: Path) -> bool:
    return bool(STARTS_PROCESSES.search(path.read_text()))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark browser and live tests by the fixtures they use and the modules they are in."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if "browser" in fixtures:
            item.add_marker(pytest.mark.browser)
        if fixtures & LIVE_FIXTURES or _starts_processes(item.path):
            item.add_marker(pytest.mark.live)
