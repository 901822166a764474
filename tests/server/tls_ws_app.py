"""A WebSocket echo app for the WebSocket-over-TLS test (TLS comes from the command line)."""

from __future__ import annotations

from socketify import Request, Response, Server
from socketify.realtime.pulse.channel import Channel

server = Server(idle_timeout=2.0, graceful_timeout=3.0)


def echo(ws: Channel, data: str | bytes, is_binary: bool) -> None:
    """Binary comes back as is, text upper-cased (so the answer is visibly the server's)."""
    if isinstance(data, bytes):
        ws.send_binary(data)
    else:
        ws.send_text(data.upper())


def ping(req: Request, res: Response) -> None:
    res.send("pong")


def flood(ws: Channel, data: str | bytes, is_binary: bool) -> None:
    """`COUNT SIZE`: send COUNT binary messages of SIZE bytes at once (a slow reader's bane)."""
    count, size = map(int, str(data).split())
    body = b"x" * size
    for _ in range(count):
        ws.send_binary(body)


server.get("/ping", ping)
server.ws("/ws", message=echo)
server.ws("/flood", message=flood)
