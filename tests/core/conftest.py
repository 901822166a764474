"""Helpers for the framework-core tests: build requests directly, no sockets."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

from socketify import Request, Response, Server
from socketify.protocol.http11 import RequestHead
from tests.support.wire import wire_bytes

MakeRequest = Callable[..., Request]
Call = Callable[..., Response]


def build_request(
    method: str = "GET",
    target: str = "/",
    headers: Iterable[tuple[str, str]] = (),
    body: bytes = b"",
    *,
    version: str = "HTTP/1.1",
    remote_addr: str = "10.0.0.1",
    trust_proxy: bool = False,
) -> Request:
    """A Request as the connection would build it (header names lower-cased)."""
    path, _, query = target.partition("?")
    head = RequestHead(method, target, path, query, version, [(n.lower(), v) for n, v in headers])
    return Request(head, body, remote_addr, trust_proxy=trust_proxy)


@pytest.fixture
def make_request() -> MakeRequest:
    """Build a Request from method, target, headers and body."""
    return build_request


@pytest.fixture
def call() -> Call:
    """Run one request through `server.handle` and return the Response."""

    def run(server: Server, method: str = "GET", target: str = "/", **kwargs: object) -> Response:
        req = build_request(method, target, **kwargs)  # type: ignore[arg-type]
        res = Response(req)
        server.handle(req, res)
        return res

    return run


@pytest.fixture
def wire() -> Callable[..., bytes]:
    """Serialize a Response as the connection would (see `tests.support.wire`)."""
    return wire_bytes
