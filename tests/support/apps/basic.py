"""The app of the tests that run the real server: one route per behaviour the tests pin.

Several Server objects share the routes and differ only in options, so a test picks the
limits it needs with `socketify run tests.support.apps.basic:<name>`. Timeouts are short so
the timeout tests finish in seconds.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import gevent
import gevent.event
import gevent.monkey

from socketify import Request, Response, Server
from socketify.middleware import body_limit

SHORT = {
    "header_timeout": 1.0,
    "body_timeout": 1.0,
    "idle_timeout": 2.0,
    "graceful_timeout": 3.0,
    "max_body_size": 64 * 1024,
}

# Streams parked until the client calls /release?key=...; only meaningful with one worker.
_gates: dict[str, gevent.event.Event] = {}


def _gate(key: str) -> gevent.event.Event:
    return _gates.setdefault(key, gevent.event.Event())


def ping(req: Request, res: Response) -> None:
    res.send("pong")


def pid(req: Request, res: Response) -> None:
    res.send(str(os.getpid()))


def echo(req: Request, res: Response) -> None:
    res.set_header("X-Method", req.method).send(req.body, "application/octet-stream")


def sleep(req: Request, res: Response) -> None:
    seconds = float(req.query.get("s", "1"))
    time.sleep(seconds)  # gevent-patched: parks this greenlet only
    res.send(f"slept {seconds}")


def boom(req: Request, res: Response) -> None:
    res.set_header("X-Before", "kept")
    raise RuntimeError("secret detail that must not leak")


def escaped_timeout(req: Request, res: Response) -> None:
    # gevent.Timeout is a BaseException: a handler's own deadline that nobody catches.
    with gevent.Timeout(0.05):
        time.sleep(1)
    res.send("unreachable")


def exits(req: Request, res: Response) -> None:
    raise SystemExit(3)


def stream_timeout(req: Request, res: Response) -> None:
    def produce() -> Iterator[bytes]:
        yield b"partial;"
        with gevent.Timeout(0.05):
            time.sleep(1)
        yield b"unreachable"

    res.stream(produce())


def block(req: Request, res: Response) -> None:
    # Not cooperative: the whole worker (hub, heartbeat) freezes, as with a C extension call.
    seconds = float(req.query.get("s", "5"))
    gevent.monkey.get_original("time", "sleep")(seconds)
    res.send("unblocked")


def stream(req: Request, res: Response) -> None:
    key = req.query.get("key", "default")
    gate = _gate(key)

    def produce() -> Iterator[bytes]:
        yield b"first;"
        gate.wait(5)  # the client releases us once it has read the first chunk
        _gates.pop(key, None)
        yield b"second;" if gate.is_set() else b"timeout;"
        yield b"third."

    res.stream(produce())


def release(req: Request, res: Response) -> None:
    key = req.query.get("key", "default")
    _gate(key).set()
    res.send("released")


def stream_fail(req: Request, res: Response) -> None:
    def produce() -> Iterator[bytes]:
        yield b"partial;"
        time.sleep(0.1)
        raise RuntimeError("generator broke midway")

    res.stream(produce())


def stream_slow_start(req: Request, res: Response) -> None:
    def produce() -> Iterator[bytes]:
        time.sleep(float(req.query.get("s", "1.5")))  # longer than request_timeout
        yield b"late but whole"

    res.stream(produce())


def stream_plain(req: Request, res: Response) -> None:
    res.stream(iter([b"a" * 10, b"b" * 10, b"c" * 10]))


def host(req: Request, res: Response) -> None:
    res.send(req.host)


def ignore_body(req: Request, res: Response) -> None:
    res.send("ignored")


def count_body(req: Request, res: Response) -> None:
    res.send(str(sum(len(piece) for piece in req.iter_body())))


def sleep_around_count(req: Request, res: Response) -> None:
    seconds = float(req.query.get("s", "0.3"))
    time.sleep(seconds)
    count_body(req, res)
    time.sleep(seconds)


def file(req: Request, res: Response) -> None:
    if not res.send_file(req.query["path"]):
        res.send_status(404)


def build(server: Server) -> Server:
    """Register the test routes on `server`."""
    server.get("/ping", ping)
    server.get("/pid", pid)
    server.any("/echo", echo)
    server.get("/sleep", sleep)
    server.get("/boom", boom)
    server.get("/block", block)
    server.get("/escaped-timeout", escaped_timeout)
    server.get("/exit", exits)
    server.get("/stream-timeout", stream_timeout)
    server.get("/stream", stream)
    server.get("/release", release)
    server.get("/stream-fail", stream_fail)
    server.get("/stream-plain", stream_plain)
    server.get("/stream-slow-start", stream_slow_start)
    server.get("/file", file)
    server.get("/host", host)
    server.post("/ignore", ignore_body)
    server.post("/count", count_body)
    server.post("/sleep-around-count", sleep_around_count)
    server.post("/limited", count_body).use(body_limit(1000))
    return server


server = build(Server(**SHORT, request_timeout=1.0))
# No handler deadline: a slow request may run until graceful_timeout.
relaxed = build(Server(**SHORT))
# A tiny connection cap.
capped = build(Server(**SHORT, max_connections=5))
# Long head and body deadlines: an answer that comes at once did not wait for one.
patient = build(
    Server(
        **{**SHORT, "header_timeout": 30.0, "body_timeout": 30.0, "max_body_size": 512 * 1024},
        request_timeout=1.0,
    )
)
