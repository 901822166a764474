"""The Pulse robustness tests' app: idle pings, backpressure, deflate, and a chat room.

Every route tells the client the pid of the worker that took it (`pid:N` as the first
message), so a test can tell the two workers apart. Close codes the server sees are broadcast
to the `events` room, which reaches a watcher on either worker.
"""

from __future__ import annotations

import os

from socketify import Request, Response, Server
from socketify.protocol.websocket import DeflateOptions, Opcode, frame_bytes
from socketify.realtime import pulse

server = Server()
hub = pulse.Hub("robustness")
FLOOD_LIMIT = 64 * 1024  # max_backpressure of /flood


def _report_close(ch: pulse.Channel, code: int, reason: str) -> None:
    token = ch.locals.get("token")
    if token:
        hub.broadcast_text("events", f"close:{token}:{code}")


def _opened(ch: pulse.Channel, req: Request) -> None:
    ch.locals["token"] = req.query.get("token")
    ch.on_close(_report_close)
    ch.send_text(f"pid:{os.getpid()}")


@server.get("/events")
def events(req: Request, res: Response) -> None:
    ch = pulse.upgrade(req, res)
    if ch is not None:
        ch.send_text(f"pid:{os.getpid()}")
        hub.join("events", ch)


@server.get("/idle")
def idle(req: Request, res: Response) -> None:
    ch = pulse.upgrade(req, res, idle_timeout=0.5)
    if ch is not None:
        _opened(ch, req)
        ch.on_text(lambda ch, text: ch.send_text(text))


def _flood(ch: pulse.Channel, text: str) -> None:
    """`flood COUNT SIZE`: send COUNT messages of SIZE bytes at once; report what went out."""
    if not text.startswith("flood "):
        ch.send_text(f"echo:{text}")
        return
    count, size = map(int, text.split()[1:])
    body = "x" * size
    sent = sum(1 for _ in range(count) if ch.send_text(body))
    ch.locals["flood"] = (sent, count - sent, ch.pending_bytes)


def _drained(ch: pulse.Channel) -> None:
    flood = ch.locals.pop("flood", None)
    if flood is not None:
        sent, dropped, pending = flood
        ch.send_text(f"drained:{sent}:{dropped}:{pending}")


server.ws(
    "/flood",
    open=lambda ws: ws.send_text(f"pid:{os.getpid()}"),
    message=lambda ws, data, is_binary: _flood(ws, str(data)),
    drain=_drained,
    max_backpressure=FLOOD_LIMIT,
    close_on_backpressure_limit=False,
)


@server.get("/deflate")
def deflate(req: Request, res: Response) -> None:
    ch = pulse.upgrade(req, res, compression=DeflateOptions(min_size=16))
    if ch is not None:
        ch.send_text(f"pid:{os.getpid()}")
        ch.on_text(lambda ch, text: ch.send_text(text))
        ch.on_binary(lambda ch, data: ch.send_binary(data))


@server.get("/chat")
def chat(req: Request, res: Response) -> None:
    ch = pulse.upgrade(req, res)
    if ch is not None:
        _opened(ch, req)
        hub.join("chat", ch)
        ch.on_text(lambda ch, text: hub.broadcast_text("chat", text))


def _burst(ch: pulse.Channel, text: str) -> None:
    """`N`: N pre-encoded frames as a hub delivers them, then how many bytes wait."""
    for n in range(int(text)):
        ch.send_frame(frame_bytes(Opcode.TEXT, f"frame {n}".encode()))
    ch.send_text(f"pending:{ch.pending_bytes}")


@server.get("/burst")
def burst(req: Request, res: Response) -> None:
    # The whole burst is corked before the kernel sees any of it: corked bytes must not
    # count as a slow consumer's backlog, or a fast client would lose broadcasts.
    ch = pulse.upgrade(req, res, max_backpressure=1024)
    if ch is not None:
        ch.on_text(_burst)
