"""The realtime tests' app: SSE and Pulse routes with hubs that span the workers."""

from __future__ import annotations

import os

from socketify import Request, Response, Server, pulse, sse

server = Server(idle_timeout=2.0)
sse_hub = sse.Hub()
pulse_hub = pulse.Hub()


@server.get("/events")
def events(req: Request, res: Response) -> None:
    stream = sse.upgrade(req, res)
    stream.retry(1500)
    stream.send_event("hello", str(os.getpid()), id=req.header("Last-Event-ID") or None)
    sse_hub.join("news", stream)


@server.get("/watch")
def watch(req: Request, res: Response) -> None:
    stream = sse.upgrade(req, res)
    stream.send_event("hello", str(os.getpid()))
    sse_hub.join(req.query.get("room") or "closes", stream)


@server.get("/events/multi")
def events_multi(req: Request, res: Response) -> None:
    stream = sse.upgrade(req, res, heartbeat=0.2)
    stream.send("a\nb\r\nc\rd")
    stream.comment("note")


@server.post("/publish")
def publish(req: Request, res: Response) -> None:
    sse_hub.broadcast("news", req.text, event="news", id=req.query.get("id"))
    res.send("ok\n")


@server.get("/echo")
def echo(req: Request, res: Response) -> None:
    ch = pulse.upgrade(req, res, subprotocols=["chat"], max_message_bytes=4096)
    if ch is None:
        return

    def on_text(ch: pulse.Channel, text: str) -> None:
        if text.startswith("close:"):
            ch.close(int(text[6:]), "bye")
        else:
            ch.send_text(text)

    token = req.query.get("token")
    if token:
        # Reported through an SSE room, so the test sees it whichever worker it listens on.
        ch.on_close(
            lambda ch, code, reason: sse_hub.broadcast("closes", f"{token}:{code}:{reason}")
        )
    ch.on_text(on_text)
    ch.on_binary(lambda ch, data: ch.send_binary(data))


@server.get("/room")
def room(req: Request, res: Response) -> None:
    ch = pulse.upgrade(req, res)
    if ch is None:
        return
    pulse_hub.join("lobby", ch)
    pulse_hub.join("lobby", ch)  # a second join must not double the deliveries
    ch.send_text(f"pid:{os.getpid()}")
    ch.on_text(lambda ch, text: pulse_hub.broadcast_text("lobby", text))


server.ws(
    "/ws",
    open=lambda ws: ws.send_text("welcome"),
    message=lambda ws, data, is_binary: (
        ws.send_binary(data) if is_binary else ws.send_text(str(data).upper())
    ),
)
