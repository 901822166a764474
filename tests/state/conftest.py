"""Shared pieces of the state tests: `tests/` and this folder on sys.path, live servers."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/services.py
sys.path.insert(0, str(HERE))  # apps.state_app


@pytest.fixture(scope="module")
def two_workers() -> Iterator[object]:
    """`socketify run apps.state_app:server --workers 2`, shared by a module's tests."""
    from socketify.testing import LiveServer

    server = LiveServer("apps.state_app:server", workers=2, cwd=str(HERE))
    with server:
        yield server
