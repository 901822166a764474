"""The app the HTTP/2 live tests run: the same routes answer HTTP/1.1 and HTTP/2 alike.

`H2_STATIC_ROOT` names the directory `/static/` serves (the test writes it). `server` has
HTTP/2's defaults; `tight` has small HTTP/2 limits, so each limit is reached in a few frames,
and a short idle timeout.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator

import gevent

from socketify import Request, Response, Server, sse, static_files
from socketify.middleware import access_log
from socketify.state import sessions

SHORT = {"idle_timeout": 5.0, "graceful_timeout": 5.0, "body_timeout": 5.0}


def ping(req: Request, res: Response) -> None:
    res.send("pong")


def version(req: Request, res: Response) -> None:
    res.send(f"{req.http_version} {req.scheme} {req.header('host')}")


def pid(req: Request, res: Response) -> None:
    res.send(str(os.getpid()))


def query(req: Request, res: Response) -> None:
    res.send(req.query_string)


def digest(req: Request, res: Response) -> None:
    hasher = hashlib.sha256()
    size = 0
    for piece in req.iter_body():
        hasher.update(piece)
        size += len(piece)
    res.send(f"{size} {hasher.hexdigest()}")


def stream(req: Request, res: Response) -> None:
    def produce() -> Iterator[bytes]:
        for n in range(int(req.query.get("n", "3"))):
            yield f"chunk {n};".encode()
            time.sleep(0.01)

    res.stream(produce())


def stream_fail(req: Request, res: Response) -> None:
    def produce() -> Iterator[bytes]:
        yield b"a good start;"
        time.sleep(0.05)
        raise RuntimeError("the producer failed after the headers went out")

    res.stream(produce())


def big(req: Request, res: Response) -> None:
    res.send("compress me please " * 4000, "text/plain")


def sleep(req: Request, res: Response) -> None:
    seconds = float(req.query.get("s", "1"))
    time.sleep(seconds)
    res.send(f"slept {seconds}")


def cookie(req: Request, res: Response) -> None:
    res.set_cookie("first", "1").set_cookie("second", "2")
    res.send(";".join(f"{k}={v}" for k, v in sorted(req.cookies.items())))


def visits(req: Request, res: Response) -> None:
    count = int(req.session.get("visits", 0)) + 1
    req.session["visits"] = count
    res.send(str(count))


def events(req: Request, res: Response) -> None:
    stream = sse.upgrade(req, res)
    stream.send("hello")

    def later() -> None:
        for n in range(3):
            time.sleep(0.02)
            stream.send_event("tick", str(n), id=n)
        stream.close()

    gevent.spawn(later)


# What the last /events-burst saw: how many events went out before a send was DROPPED.
_burst: dict[str, int] = {}


def events_burst(req: Request, res: Response) -> None:
    stream = sse.upgrade(req, res, max_backpressure=64 * 1024)
    event = sse.encode_event("x" * 1024)

    def burst() -> None:
        time.sleep(0.05)  # the head is out
        sent = 0
        while sent < 10_000 and stream.write(event):
            sent += 1
        _burst["sent"] = sent

    _burst.clear()
    gevent.spawn(burst)


def burst_result(req: Request, res: Response) -> None:
    res.send(str(_burst.get("sent", "running")))


def build(server: Server) -> Server:
    """Register the routes on `server`."""
    server.use(access_log.middleware(format="common"))
    server.get("/ping", ping)
    server.get("/version", version)
    server.get("/pid", pid)
    server.get("/q", query)
    server.post("/digest", digest)
    server.get("/stream", stream)
    server.get("/stream-fail", stream_fail)
    server.get("/big", big)
    server.get("/sleep", sleep)
    server.get("/cookie", cookie)
    server.get("/visits", visits).use(sessions.middleware(secret="h2-test-secret " * 3))
    server.get("/events", events)
    server.get("/events-burst", events_burst)
    server.get("/burst-result", burst_result)
    root = os.environ.get("H2_STATIC_ROOT")
    if root:
        server.use(static_files.serve(root, "/static"))
    return server


server = build(Server(**SHORT))
tight = build(
    Server(
        **{**SHORT, "idle_timeout": 1.5},
        max_header_size=4096,
        http2_max_concurrent_streams=10,
        http2_max_resets_per_second=20,
        http2_max_pings_per_second=20,
        http2_max_settings_per_second=20,
        http2_send_timeout=1.0,
    )
)
