"""Fixtures every test folder may use; the helpers behind them live in `tests/support/`."""

from __future__ import annotations

from collections.abc import Iterator
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
