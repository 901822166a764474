"""The realtime tests' app: SSE and Pulse routes with hubs that span the workers."""

from __future__ import annotations

import os

from socketify import Request, Response, Server
from socketify.realtime import pulse, sse
from socketify.realtime.pulse import easy, media

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


@server.get("/pulse/join")
def pulse_join(req: Request, res: Response) -> None:
    """Joins `?room=`; answers `size` with `size:<all workers>:<this worker>`."""
    ch = pulse.upgrade(req, res)
    if ch is None:
        return
    room = req.query.get("room") or "lobby"
    pulse_hub.join(room, ch)
    ch.send_text(f"pid:{os.getpid()}")

    def on_text(ch: pulse.Channel, text: str) -> None:
        if text == "size":
            ch.send_text(f"size:{pulse_hub.room_size(room)}:{pulse_hub.local_size(room)}")
        elif text == "leave":
            pulse_hub.leave(room, ch)
            ch.send_text("left")
        else:
            pulse_hub.broadcast_text(room, text, exclude=ch if text.startswith("x:") else None)

    ch.on_text(on_text)
    ch.on_binary(lambda ch, data: pulse_hub.broadcast_binary(room, data))


@server.get("/sse/size")
def sse_size(req: Request, res: Response) -> None:
    room = req.query.get("room") or "news"
    res.json({"pid": os.getpid(), "size": sse_hub.room_size(room)})


# -- pulse.easy and pulse.media: one App, its hub shared with the media rooms ---------------

easy_app = easy.App()
media_hub = media.MediaHub(easy_app.hub)
media_hub.relay_room("call")  # frames go to the other members, bytes unchanged
stats = {"images": 0}


@easy_app.on("/easy")
def easy_connection(conn: easy.Connection) -> None:
    conn.emit("hello", {"pid": os.getpid()})
    conn.on("join", lambda conn, data: conn.emit("joined", _joined(conn, data["room"])))
    conn.on("leave", lambda conn, data: conn.emit("left", {"ok": conn.leave(data["room"])}))
    conn.on("say", lambda conn, data: conn.broadcast(data.get("room"), "said", data))
    conn.on("size", lambda conn, data: conn.emit("size", _sizes(data["room"])))
    conn.on("media", lambda conn, data: conn.emit("media", _media_join(conn, data["room"])))
    # The user's own binary handler: media frames never reach it, everything else does.
    conn.channel.on_binary(lambda ch, data: ch.send_binary(b"user:" + data))


def _joined(conn: easy.Connection, room: str) -> dict[str, object]:
    conn.join(room)
    return {"room": room, **_sizes(room)}


def _sizes(room: str) -> dict[str, object]:
    hub = easy_app.hub
    return {"pid": os.getpid(), "size": hub.room_size(room), "local": hub.local_size(room)}


def _media_join(conn: easy.Connection, room: str) -> dict[str, object]:
    media_hub.join(room, conn.channel)
    return {"room": room, "pid": os.getpid(), "size": media_hub.room_size(room)}


def _count_image(ch: pulse.Channel, frame: media.Frame) -> None:
    stats["images"] += 1
    media_hub.send_image("gallery", frame.payload, frame.mime)  # re-packed: new seq, same mime


media_hub.on_image("gallery", _count_image)
easy_app.bind(server)


@easy_app.on("/easy/quiet", error_events=False)
def quiet_connection(conn: easy.Connection) -> None:
    """Recorded after `bind`: registered at once; invalid envelopes are dropped here."""
    conn.emit("hello", {"pid": os.getpid()})
    conn.on("ping", lambda conn, data: conn.emit("pong", data))
