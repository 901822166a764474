"""Uploads, downloads, an event stream, a WebSocket echo and a TCP echo (on $BYTES_TCP_BIND):
known transfers for the byte counters."""

from __future__ import annotations

import os

from socketify import Request, Response, Server, tcp
from socketify.realtime import sse
from socketify.realtime.pulse.channel import Channel

web = Server(max_body_size=4 << 20)


@web.post("/upload")
def upload(req: Request, res: Response) -> None:
    res.send(str(len(req.body)))


@web.get("/download")
def download(req: Request, res: Response) -> None:
    res.send(b"d" * int(req.query["size"]), "application/octet-stream")


@web.get("/events")
def events(req: Request, res: Response) -> None:
    stream = sse.upgrade(req, res)
    for number in range(int(req.query["count"])):
        stream.send_event("tick", "e" * 1000, id=str(number))


def echo(channel: Channel, message: str | bytes, is_binary: bool) -> None:
    if isinstance(message, str):
        channel.send_text(message)
    else:
        channel.send_binary(message)


web.ws("/echo", message=echo)


def tcp_echo(conn: tcp.StreamConnection) -> None:
    """Send back every read until the client closes."""
    while data := conn.recv():
        conn.send(data)


echo_service = tcp.Service(tcp_echo)
site = tcp.Bundle(web, {os.environ.get("BYTES_TCP_BIND", "127.0.0.1:7009"): echo_service})
