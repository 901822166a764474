"""Shared pieces of the state tests: live servers, a Redis of the test's own."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.serve import Launcher, ServerProcess
from tests.support.services import require_module, unavailable


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`socketify run tests.state.apps.state_app:server --workers 2`, shared by a module."""
    with Launcher(tmp_path_factory.mktemp("state")) as launcher:
        yield launcher("tests.state.apps.state_app:server", workers=2)


@pytest.fixture
def private_redis() -> Iterator[Any]:
    """A `redis-server` of the test's own on a free port, to stop and kill (never the
    machine's shared one); killed after the test."""
    require_module("redis", "pip install 'socketify-gevent[redis]'")
    from load_tests.redis_server import PrivateRedis, RedisMissing

    try:
        server = PrivateRedis()
    except RedisMissing as exc:
        unavailable(str(exc))
    with contextlib.closing(server):
        server.start()
        yield server
