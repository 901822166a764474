"""Fixtures for the framework-core tests: build requests directly, no sockets."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from socketify import Request, Response, Server
from tests.support.handle import build_request, handle
from tests.support.wire import wire_bytes

MakeRequest = Callable[..., Request]
Call = Callable[..., Response]


@pytest.fixture
def make_request() -> MakeRequest:
    """Build a Request from method, target, headers and body."""
    return build_request


@pytest.fixture
def call() -> Call:
    """Run one request through `server.handle` and return the Response."""

    def run(server: Server, method: str = "GET", target: str = "/", **kwargs: object) -> Response:
        return handle(server, build_request(method, target, **kwargs))  # type: ignore[arg-type]

    return run


@pytest.fixture
def wire() -> Callable[..., bytes]:
    """Serialize a Response as the connection would (see `tests.support.wire`)."""
    return wire_bytes
