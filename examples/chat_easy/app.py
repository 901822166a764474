"""Chat on pulse.easy, with pictures and voice as pulse.media frames: one lobby, every worker.

    socketify run examples.chat_easy.app:server --bind 127.0.0.1:8080 --workers 2
    open http://127.0.0.1:8080/ in two browser windows
    curl localhost:8080/stats      # {"voice_frames": 0, "voice_bytes": 0, "pictures": 0, ...}

The page speaks JSON events (`{"type": ..., "data": ...}`) over one WebSocket at `/chat`:
`hello {name}` enters the lobby, `say {text}` talks, and the server answers with `welcome`,
`said`, `joined`, `left` and `online {count, seq}` (the newest `seq` wins). The online count is
the lobby's `room_size`, which counts the people on every worker. A picture goes out as one
binary `PM` image frame (kind 3, with its mime type); the server announces it with a `picture
{name}` event and relays the bytes untouched to the other members of the media room `lobby`, a
room of its own beside the chat room of the same name. A bigger picture may come in chunks
(image frames without the last flag, then an image-end frame), relayed one by one as they
arrive, at most 512 KiB in all. Voice goes the same way: the page's Talk button sends `talk
{on}` (the others see `talking {name, on}`) and then microphone audio as `PM` voice frames
(kind 1, 16-bit mono PCM at 16 kHz), each relayed once, untouched, to everyone else.

The chat room and the media room are two rooms of one hub, and a member joins each once, so
nothing reaches anyone twice. `/stats` counts what was relayed, summed over every worker
through the shared store.

Guide: docs/guide/websocket.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from socketify import Request, Response, Server, static_files
from socketify.realtime import pulse
from socketify.realtime.pulse import easy, media
from socketify.state.shared_store import SharedStore

PUBLIC = Path(__file__).resolve().parent / "public"
LOBBY = "lobby"
MAX_NAME = 24
MAX_TEXT = 500
MAX_PICTURE = 512 * 1024  # the page refuses bigger files; the socket limit is a little above

STATS = ("voice_frames", "voice_bytes", "pictures", "image_bytes")

server = Server()
server.use(static_files.serve(str(PUBLIC), cache_max_age=60))
chat = easy.App(error_events=True)
lobby_media = media.MediaHub(chat.hub)
counters = SharedStore(namespace="chat_easy:stats:")


@chat.on("/chat", max_message_bytes=MAX_PICTURE + 1024)
def connected(conn: easy.Connection) -> None:
    conn.on("hello", enter)
    conn.on("say", say)
    conn.on("talk", talk)
    conn.on_close(leave)


def enter(conn: easy.Connection, data: Any) -> None:
    name = str(data.get("name", "") if isinstance(data, dict) else "").strip()[:MAX_NAME]
    if not name or "name" in conn.locals:
        conn.emit("error", {"error": "bad_name", "message": "pick a name (once)"})
        return
    conn.locals["name"] = name
    conn.join(LOBBY)
    lobby_media.join(LOBBY, conn.channel)
    conn.emit("welcome", {"name": name})
    conn.broadcast(LOBBY, "joined", {"name": name}, include_self=False)
    _announce_online()


def say(conn: easy.Connection, data: Any) -> None:
    text = str(data.get("text", "") if isinstance(data, dict) else "").strip()[:MAX_TEXT]
    if text and "name" in conn.locals:
        conn.broadcast(LOBBY, "said", {"name": conn.locals["name"], "text": text})


def talk(conn: easy.Connection, data: Any) -> None:
    on = data.get("on") if isinstance(data, dict) else None
    if "name" in conn.locals and isinstance(on, bool):
        conn.broadcast(
            LOBBY, "talking", {"name": conn.locals["name"], "on": on}, include_self=False
        )


def leave(conn: easy.Connection, code: int, reason: str) -> None:
    if "name" in conn.locals:
        conn.leave(LOBBY)
        conn.broadcast(LOBBY, "left", {"name": conn.locals["name"]})
        _announce_online()


def share_picture(ch: pulse.Channel, frame: media.Frame) -> None:
    conn = chat.connection(ch)
    if conn is None or "name" not in conn.locals:
        return
    # A picture is one frame flagged last, or chunks up to an image-end frame: each frame is
    # relayed as it comes, and the bytes of one picture are capped like a single frame's.
    received = conn.locals.get("picture_bytes")
    if received is None:  # the first frame of a picture: say whose it is
        received = 0
        # Both broadcasts leave this worker in this order, so every page learns who sent the
        # picture just before its first bytes.
        conn.broadcast(LOBBY, "picture", {"name": conn.locals["name"]}, include_self=False)
    received += len(frame.payload)
    if received > MAX_PICTURE:
        if received - len(frame.payload) <= MAX_PICTURE:  # say it once, drop the rest
            conn.emit(
                "error",
                {"error": "too_big", "message": f"pictures up to {MAX_PICTURE // 1024} KiB"},
            )
    else:
        lobby_media.relay(LOBBY, frame, exclude=ch)
        counters.incr("image_bytes", len(frame.payload))
        if frame.is_last:
            counters.incr("pictures")
    conn.locals["picture_bytes"] = None if frame.is_last else received


def share_voice(ch: pulse.Channel, frame: media.Frame) -> None:
    conn = chat.connection(ch)
    if conn is None or "name" not in conn.locals:
        return
    # The client's bytes as they came (its seq and timestamps order the playback), to every
    # member but the speaker.
    lobby_media.relay(LOBBY, frame, exclude=ch)
    counters.incr("voice_frames")
    counters.incr("voice_bytes", len(frame.payload))


lobby_media.on_image(LOBBY, share_picture)
lobby_media.on_voice(LOBBY, share_voice)


@server.get("/stats")
def stats(req: Request, res: Response) -> None:
    res.json({name: int(counters.get(name) or 0) for name in STATS})


def _announce_online() -> None:
    # room_size counts every worker's members; the census can lag a join on another worker by
    # a bus hop, so the count is sent as news, not as a promise. Announcements from two workers
    # may also arrive in either order (a member who joins on worker B can get B's fresh count
    # before worker A's older one, still on the bus): `seq`, taken from the store all workers
    # share before the count is read, lets the page keep the newest and drop the rest.
    seq = counters.incr("online_seq")
    count = chat.hub.room_size(LOBBY)
    chat.hub.broadcast_text(LOBBY, easy.envelope("online", {"count": count, "seq": seq}))


chat.bind(server)
