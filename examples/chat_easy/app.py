"""Chat on pulse.easy, with pictures sent as pulse.media frames: one lobby across all workers.

    socketify run examples.chat_easy.app:server --bind 127.0.0.1:8080 --workers 2
    open http://127.0.0.1:8080/ in two browser windows

The page speaks JSON events (`{"type": ..., "data": ...}`) over one WebSocket at `/chat`:
`hello {name}` enters the lobby, `say {text}` talks, and the server answers with `welcome`,
`said`, `joined`, `left` and `online {count}`. The online count is the lobby's `room_size`,
which counts the people on every worker. A picture goes out as one binary `PM` image frame
(kind 3, with its mime type); the server announces it with a `picture {name}` event and
relays the bytes untouched to the other members of the media room `lobby`, a room of its own
beside the chat room of the same name.

Guide: docs/guide/websocket.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from socketify import Server, static_files
from socketify.realtime import pulse
from socketify.realtime.pulse import easy, media

PUBLIC = Path(__file__).resolve().parent / "public"
LOBBY = "lobby"
MAX_NAME = 24
MAX_TEXT = 500
MAX_PICTURE = 512 * 1024  # the page refuses bigger files; the socket limit is a little above

server = Server()
server.use(static_files.serve(str(PUBLIC), cache_max_age=60))
chat = easy.App(error_events=True)
pictures = media.MediaHub(chat.hub)


@chat.on("/chat", max_message_bytes=MAX_PICTURE + 1024)
def connected(conn: easy.Connection) -> None:
    conn.on("hello", enter)
    conn.on("say", say)
    conn.on_close(leave)


def enter(conn: easy.Connection, data: Any) -> None:
    name = str(data.get("name", "") if isinstance(data, dict) else "").strip()[:MAX_NAME]
    if not name or "name" in conn.locals:
        conn.emit("error", {"error": "bad_name", "message": "pick a name (once)"})
        return
    conn.locals["name"] = name
    conn.join(LOBBY)
    pictures.join(LOBBY, conn.channel)
    conn.emit("welcome", {"name": name})
    conn.broadcast(LOBBY, "joined", {"name": name}, include_self=False)
    _announce_online()


def say(conn: easy.Connection, data: Any) -> None:
    text = str(data.get("text", "") if isinstance(data, dict) else "").strip()[:MAX_TEXT]
    if text and "name" in conn.locals:
        conn.broadcast(LOBBY, "said", {"name": conn.locals["name"], "text": text})


def leave(conn: easy.Connection, code: int, reason: str) -> None:
    if "name" in conn.locals:
        conn.leave(LOBBY)
        conn.broadcast(LOBBY, "left", {"name": conn.locals["name"]})
        _announce_online()


def share_picture(ch: pulse.Channel, frame: media.Frame) -> None:
    conn = chat.connection(ch)
    if conn is None or "name" not in conn.locals or not frame.is_last:
        return
    # Both broadcasts leave this worker in this order, so every page sees who sent the
    # picture just before the picture itself.
    conn.broadcast(LOBBY, "picture", {"name": conn.locals["name"]}, include_self=False)
    pictures.relay(LOBBY, frame, exclude=ch)


pictures.on_image(LOBBY, share_picture)


def _announce_online() -> None:
    # room_size counts every worker's members; the census can lag a join on another worker by
    # a bus hop, so the count is sent as news, not as a promise.
    chat.hub.broadcast_text(LOBBY, easy.envelope("online", {"count": chat.hub.room_size(LOBBY)}))


chat.bind(server)
