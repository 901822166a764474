"""Helpers for the framework-core tests: build requests directly, no sockets."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

from socketify import Request, Response, Server
from socketify.protocol.http11 import RequestHead, ServerConnection
from socketify.server.exchange import FileRange, response_parts

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


def wire_bytes(
    res: Response, *, keep_alive: bool = True, method: str | None = None, version: str = "HTTP/1.1"
) -> bytes:
    """`res` as a connection writes it for a `method` request (file ranges read from disk).

    The method defaults to HEAD for a response made for a HEAD request, else GET.
    """
    method = method or ("HEAD" if res.head_only else "GET")
    conn = ServerConnection()
    conn.receive_data(f"{method} / {version}\r\nHost: x\r\n\r\n".encode())
    conn.next_event()
    parts = []
    for part in response_parts(conn, res, keep_alive):
        if isinstance(part, FileRange):
            with open(part.path, "rb") as file:
                file.seek(part.offset)
                part = part.head + file.read(part.length)
        parts.append(part)
    return b"".join(parts)


@pytest.fixture
def wire() -> Callable[..., bytes]:
    """Serialize a Response as the connection would (see `wire_bytes`)."""
    return wire_bytes
