"""Long-lived clients of every kind, and a slow request, for the graceful-stop tests.

`graceful_timeout` stays at its 30-second default: the tests show that a stop does not wait
it out when every connection winds down by itself.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from socketify import Request, Response, Server, pulse, sse

server = Server()


@server.get("/pid")
def pid(req: Request, res: Response) -> None:
    res.send(str(os.getpid()))


@server.get("/slow")
def slow(req: Request, res: Response) -> None:
    """Answer 1.5 s later; first tell the test it is in the handler (a file, when asked)."""
    started = os.environ.get("DRAIN_STARTED_FILE")
    if started:
        Path(started).touch()
    time.sleep(1.5)
    res.send("finished")


def _last_event(stream: sse.EventStream) -> None:
    stream.send_event("bye", "server stopping")


@server.get("/events")
def events(req: Request, res: Response) -> None:
    stream = sse.upgrade(req, res)
    stream.on_stop(_last_event)
    stream.send_event("hello", str(os.getpid()))


@server.get("/pulse")
def channel(req: Request, res: Response) -> None:
    ch = pulse.upgrade(req, res)
    if ch is None:
        return
    ch.on_text(lambda ch, text: ch.send_text(text))
    ch.on_stop(lambda ch: ch.send_text("bye"))
    ch.send_text(str(os.getpid()))


def _open(ws: pulse.Channel) -> None:
    ws.send_text(str(os.getpid()))


server.ws("/ws", open=_open, message=lambda ws, data, binary: ws.send_text(str(data)))
