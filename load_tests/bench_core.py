"""Micro-benchmark of the framework core (run: python load_tests/bench_core.py).

Measures what one request costs above the parser: Request + Response construction,
`Server.handle` and `to_bytes`, for the benchmarked `/ping` route and a few variations.
"""

from __future__ import annotations

import timeit
from collections.abc import Callable

from socketify import Request, Response, Server
from socketify.protocol.http11 import RequestHead


def ping(req: Request, res: Response) -> None:
    """The benchmarked /ping handler: explicit Content-Type, then the exact body."""
    res.set_header("Content-Type", "application/json")
    res.send(b'{"ok":true}')


def user(req: Request, res: Response) -> None:
    """A parameter route answering JSON."""
    res.json({"id": req.params["id"]})


def passthrough(req: Request, res: Response, next: Callable[[], None]) -> None:
    """A middleware that only calls next()."""
    next()


def build() -> Server:
    """The benchmark server: /ping plus a parameter route."""
    server = Server()
    server.get("/ping", ping)
    server.get("/users/:id", user)
    server.freeze()
    return server


def per_request_us(
    server: Server, head: RequestHead, rounds: int = 7, number: int = 50000
) -> float:
    """Best-of-rounds µs for Request + Response + handle + to_bytes."""

    def one() -> bytes:
        req = Request(head, b"", "127.0.0.1")
        res = Response(req)
        server.handle(req, res)
        return res.to_bytes(True)

    return min(timeit.repeat(one, repeat=rounds, number=number)) / number * 1e6


def main() -> None:
    plain = build()
    mw_server = Server()
    mw_server.use(passthrough)
    mw_server.get("/ping", ping)
    mw_server.freeze()
    ping_head = RequestHead("GET", "/ping", "/ping", "", "HTTP/1.1", [("host", "127.0.0.1:8080")])
    user_head = RequestHead(
        "GET", "/users/42", "/users/42", "", "HTTP/1.1", [("host", "127.0.0.1:8080")]
    )
    miss_head = RequestHead("GET", "/nope", "/nope", "", "HTTP/1.1", [("host", "127.0.0.1:8080")])
    for name, server, head in (
        ("/ping (static route)", plain, ping_head),
        ("/users/:id (param, json)", plain, user_head),
        ("/nope (404)", plain, miss_head),
        ("/ping + 1 global mw", mw_server, ping_head),
    ):
        print(f"{name:28s} {per_request_us(server, head):6.2f} µs/request")


if __name__ == "__main__":
    main()
