"""One `socketify run realtime_app:server --workers 2` shared by the realtime tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from socketify.testing import LiveServer

HERE = Path(__file__).parent


@pytest.fixture(scope="package")
def live() -> Iterator[LiveServer]:
    """The realtime app on two workers, so hubs must cross processes to pass the tests."""
    with LiveServer("realtime_app:server", workers=2, cwd=str(HERE)) as server:
        yield server
