"""The slow-reader tests' app (one worker): floods that back up, and what the worker saw.

A flood sends COUNT messages (or events) of SIZE bytes in one go and records how many sends
returned each `SendStatus`. `GET /report?key=` answers the worker's record for a connection:
those counts, once the flood is over, and the close code its close callback saw. `server.ws`
routes send the channel id as their first message (that is the key); the others take a
`key` in the query.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import gevent

from socketify import Request, Response, Server
from socketify.realtime import pulse, sse

server = Server()
hub = pulse.Hub("slow-readers")
IDLE = 0.5  # idle_timeout of /idle
reports: dict[str, dict[str, Any]] = {}


def _record(key: str) -> dict[str, Any]:
    return reports.setdefault(key, {"statuses": None, "close": None})


def _flood(key: str, send: Callable[[bytes], pulse.SendStatus], count: int, size: int) -> None:
    body = b"x" * size
    statuses = Counter(send(body).name for _ in range(count))
    _record(key)["statuses"] = dict(statuses)


def _closed(ch: pulse.Channel, code: int, reason: str) -> None:
    _record(ch.locals.get("key", ch.id))["close"] = code


@server.get("/ping")
def ping(req: Request, res: Response) -> None:
    res.send("pong")


@server.get("/report")
def report(req: Request, res: Response) -> None:
    res.json(reports.get(req.query.get("key") or "", {}))


def _opened(ws: pulse.Channel) -> None:
    ws.on_close(_closed)
    ws.send_text(ws.id)


def _flood_on_message(ws: pulse.Channel, data: str | bytes, is_binary: bool) -> None:
    """`COUNT SIZE`: flood this channel with binary messages."""
    count, size = map(int, str(data).split())
    _flood(ws.id, ws.send_binary, count, size)


server.ws("/flood", open=_opened, message=_flood_on_message)
server.ws("/echo", open=_opened, message=lambda ws, data, is_binary: ws.send_text(str(data)))
server.ws("/idle", open=_opened, idle_timeout=IDLE)


@server.get("/flood-in-handler")
def flood_in_handler(req: Request, res: Response) -> None:
    """Floods before the 101 is out: those frames wait for the head, and count too."""
    ch = pulse.upgrade(req, res)
    if ch is not None:
        key = ch.locals["key"] = req.query["key"]
        ch.on_close(_closed)
        _flood(key, ch.send_binary, int(req.query["count"]), int(req.query["size"]))


@server.get("/room")
def room(req: Request, res: Response) -> None:
    ch = pulse.upgrade(req, res)
    if ch is not None:
        ch.locals["key"] = req.query["key"]
        ch.on_close(_closed)
        hub.join("room", ch)
        ch.send_text("joined")


@server.post("/broadcast")
def broadcast(req: Request, res: Response) -> None:
    """Broadcast COUNT binary messages of SIZE bytes to the room, one per loop turn."""
    body = b"x" * int(req.query["size"])
    for _ in range(int(req.query["count"])):
        hub.broadcast_binary("room", body)
        gevent.sleep(0)
    res.json({"members": hub.local_size("room")})


@server.get("/events")
def events(req: Request, res: Response) -> None:
    """An event stream that floods from another greenlet once the head is out."""
    key = req.query["key"]
    stream = sse.upgrade(req, res)
    stream.on_close(lambda stream: _record(key).update(close="closed"))
    count, size = int(req.query["count"]), int(req.query["size"])
    body = "x" * size

    def flood() -> None:
        stream.send_event("ready", key)
        gevent.sleep(0.05)  # a feed producing later, not in the handler
        _flood(key, lambda data: stream.send(body), count, size)

    gevent.spawn(flood)
