"""Floods for slow readers: `socketify run load_tests.apps.slow_reader:server`.

- `GET /flood` (WebSocket, default limits): the message `COUNT SIZE` makes the server send
  COUNT binary messages of SIZE bytes at once, as a handler that produces faster than its
  client reads would, then closes with 1000.
- `GET /events?count=&size=` (SSE): the same flood as events, from a greenlet started once
  the handler returns (a feed that produces after the stream is open), then the end.
- `GET /ping`: plain HTTP, so the harness can tell when the server is up.

`load_tests/faults.py slow-reader` opens clients that never read against it and measures
the worker's memory.
"""

from __future__ import annotations

import gevent

from socketify import Request, Response, Server
from socketify.realtime import sse
from socketify.realtime.pulse import Channel

server = Server()


@server.get("/ping")
def ping(req: Request, res: Response) -> None:
    res.send("pong")


def _flood(ws: Channel, data: str | bytes, is_binary: bool) -> None:
    count, size = map(int, str(data).split())
    body = b"x" * size
    for _ in range(count):
        ws.send_binary(body)
    ws.close(1000, "done")  # a client that kept up gets everything, then this


server.ws("/flood", message=_flood)


@server.get("/events")
def events(req: Request, res: Response) -> None:
    stream = sse.upgrade(req, res)
    count, size = int(req.query["count"]), int(req.query["size"])
    body = "x" * size

    def flood() -> None:
        for _ in range(count):
            stream.send(body)
        stream.close()  # a finite feed: ends once what was sent is written

    gevent.spawn_later(0.01, flood)
