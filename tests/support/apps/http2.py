"""The app of the HTTP/2 tests: small answers, an echo, a large streamed body, a page.

`server` is served over h2c (plain binds) by the conformance tests and over TLS (given by
the command line) to Chromium by the browser test. One worker: the tests check with `/pid`
that the worker that took an abusive connection is the one still answering.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from socketify import Request, Response, Server

CHUNK = 64 * 1024
# A repeating pattern, so a client can tell a byte out of place in a large body.
PATTERN = bytes(range(251)) * (CHUNK // 251 + 2)

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>h2</title></head>
<body><p id="status">loaded</p></body></html>
"""


def ping(req: Request, res: Response) -> None:
    res.send("pong")


def pid(req: Request, res: Response) -> None:
    res.send(str(os.getpid()))


def echo(req: Request, res: Response) -> None:
    res.send(req.body, "application/octet-stream")


def large(req: Request, res: Response) -> None:
    """`size` bytes (default 1 MiB) of PATTERN, streamed in 64 KiB chunks."""
    size = int(req.query.get("size", str(1 << 20)))

    def produce() -> Iterator[bytes]:
        sent = 0
        while sent < size:
            piece = min(CHUNK, size - sent)
            offset = sent % 251
            yield PATTERN[offset : offset + piece]
            sent += piece

    res.set_header("Content-Type", "application/octet-stream")
    res.stream(produce())


def page(req: Request, res: Response) -> None:
    res.send(PAGE, "text/html; charset=utf-8")


def api(req: Request, res: Response) -> None:
    res.json({"version": req.http_version, "scheme": req.scheme})


def build(server: Server) -> Server:
    """Register the routes on `server`."""
    server.get("/ping", ping)
    server.get("/pid", pid)
    server.any("/echo", echo)
    server.get("/large", large)
    server.get("/", page)
    server.get("/api/protocol", api)
    return server


server = build(Server(max_body_size=4 * 1024 * 1024, graceful_timeout=3.0))
