"""Requests built as the connection builds them, run through `Server.handle`: no socket.

res = handle(server, build_request("POST", "/echo", [("Content-Type", "text/plain")], b"hi"))
"""

from __future__ import annotations

from collections.abc import Iterable

from socketify import Request, Response, Server
from socketify.protocol.http11 import RequestHead

__all__ = ["build_request", "handle"]


def build_request(
    method: str = "GET",
    target: str = "/",
    headers: Iterable[tuple[str, str]] = (),
    body: bytes | Iterable[bytes] = b"",
    *,
    version: str = "HTTP/1.1",
    content_length: int | None = None,
    remote_addr: str = "10.0.0.1",
    trust_proxy: bool = False,
) -> Request:
    """A Request as the connection builds it (header names lower-cased); `body` may be an
    iterable of pieces, as a streamed body arrives."""
    path, _, query = target.partition("?")
    head = RequestHead(
        method, target, path, query, version, [(n.lower(), v) for n, v in headers],
        content_length=content_length,
    )  # fmt: skip
    return Request(head, body, remote_addr, trust_proxy=trust_proxy)


def handle(server: Server, req: Request) -> Response:
    """Run one built request through `server.handle` and return its Response."""
    res = Response(req)
    server.handle(req, res)
    return res
