"""Shared pieces of the state tests: `tests/` and this folder on sys.path, live servers."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # load_tests.redis_server
sys.path.insert(0, str(HERE.parent))  # tests/services.py
sys.path.insert(0, str(HERE))  # apps.state_app


@pytest.fixture(scope="module")
def two_workers() -> Iterator[object]:
    """`socketify run apps.state_app:server --workers 2`, shared by a module's tests."""
    from socketify.testing import LiveServer

    server = LiveServer("apps.state_app:server", workers=2, cwd=str(HERE))
    with server:
        yield server


@pytest.fixture
def private_redis() -> Iterator[Any]:
    """A `redis-server` of the test's own on a free port, to stop and kill (never the
    machine's shared one); killed after the test."""
    from services import require_module, services_required

    require_module("redis", "pip install 'socketify-gevent[redis]'")
    from load_tests.redis_server import PrivateRedis, RedisMissing

    try:
        server = PrivateRedis()
    except RedisMissing as exc:
        if services_required():
            pytest.fail(str(exc), pytrace=False)
        pytest.skip(str(exc))
    with contextlib.closing(server):
        server.start()
        yield server
