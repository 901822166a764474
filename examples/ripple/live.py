"""Ripple's live side: one WSS connection per page at `/pulse`, JSON events and voice frames.

Each connection belongs to a signed-in user (the session cookie of the upgrade request) and
joins the room `user:<id>`, on a hub that spans the workers: telling a user something is one
broadcast to their room, whichever worker holds their pages, however many tabs they have.
The same rooms give presence: a user is online while their room has members anywhere.

Events from the page: `send {chat_id, text, file?}`, `typing {chat_id}`,
`read {chat_id, message_id}`, and for calls `call_invite`, `call_accept`, `call_reject`,
`call_end`, each `{chat_id}`. Events to the page: `hello {user}`, `message`, `typing`,
`read`, `presence {user_id, online}`, `chat {id}` (someone started a chat with you), the
`call_*` events (with `chat_id` and `from`), `call_taken` (another of your pages answered),
and `error`.

A call lives in the media room `call:<chat_id>`: the caller joins it with the invite, a
callee with the accept, and every voice frame (the `PM` format of `pulse.media`) a member
sends there is relayed, bytes unchanged, to the others. Leaving the page ends the call for
the one who left. Besides the room, the server only remembers which call each connection is
in; who may call whom is the chat's membership.

Guide: docs/guide/websocket.md.
"""

from __future__ import annotations

from typing import Any

from pony.orm import db_session

from examples.ripple import store
from examples.ripple.uploads import checked_file
from socketify.realtime.pulse import easy, media

__all__ = ["connected", "is_online", "live", "tell", "voice"]

MAX_FRAME = 64 * 1024  # a text event, or a voice frame of a few hundred milliseconds
CALL_EVENTS = ("call_invite", "call_accept", "call_reject", "call_end")

live = easy.App(error_events=True)
voice = media.MediaHub(live.hub)


def _user_room(user_id: int) -> str:
    return f"user:{user_id}"


def _call_room(chat_id: int) -> str:
    return f"call:{chat_id}"


def is_online(user_id: int) -> bool:
    """Whether `user_id` has a page open on any worker."""
    return live.hub.room_size(_user_room(user_id)) > 0


def tell(user_ids: list[int], type: str, data: Any) -> None:
    """Send one event to every open page of each of `user_ids`, on every worker."""
    text = easy.envelope(type, data)
    for user_id in user_ids:
        live.hub.broadcast_text(_user_room(user_id), text)


def _contacts(user_id: int) -> list[int]:
    """The other users who share a chat with `user_id`: those who see their presence."""
    with db_session:
        chats = store.Member.select(lambda m: m.user.id == user_id)
        return sorted({m.user.id for member in chats for m in member.chat.members} - {user_id})


def connected(conn: easy.Connection, user: dict[str, Any]) -> None:
    """Adopt a new connection of a signed-in `user` (the route checked the session)."""
    conn.locals["user"] = user
    conn.join(_user_room(user["id"]))
    for event, handler in HANDLERS.items():
        conn.on(event, handler)
    conn.on_close(_closed)
    conn.emit("hello", {"user": user})
    tell(_contacts(user["id"]), "presence", {"user_id": user["id"], "online": True})


def _closed(conn: easy.Connection, code: int, reason: str) -> None:
    user_id = conn.locals["user"]["id"]
    call = conn.locals.pop("call", None)
    if call is not None:
        _end_call(conn, call)
    conn.leave(_user_room(user_id))
    # Other workers' members are counted by the census; this page has left the local count.
    tell(_contacts(user_id), "presence", {"user_id": user_id, "online": is_online(user_id)})


def _chat_id(conn: easy.Connection, data: Any) -> int | None:
    chat_id = data.get("chat_id") if isinstance(data, dict) else None
    if not isinstance(chat_id, int) or isinstance(chat_id, bool):
        conn.emit("error", {"error": "bad_request", "message": "chat_id must be an integer"})
        return None
    return chat_id


def _members(conn: easy.Connection, chat_id: int) -> list[int] | None:
    try:
        with db_session:
            return store.member_ids(chat_id, conn.locals["user"]["id"])
    except store.NotMember:
        conn.emit("error", {"error": "not_found", "message": f"no chat {chat_id}"})
        return None


def _send(conn: easy.Connection, data: Any) -> None:
    chat_id = _chat_id(conn, data)
    if chat_id is None:
        return
    text = data.get("text", "")
    file = data.get("file")
    if not isinstance(text, str) or len(text) > store.MAX_TEXT or not (text.strip() or file):
        conn.emit(
            "error", {"error": "bad_request", "message": f"text: 1 to {store.MAX_TEXT} characters"}
        )
        return
    attachment = checked_file(file) if file is not None else None
    if file is not None and attachment is None:
        conn.emit("error", {"error": "bad_request", "message": "file: not an upload of ours"})
        return
    try:
        with db_session:
            message, members = store.post(
                chat_id, conn.locals["user"]["id"], text.strip(), attachment
            )
    except store.NotMember:
        conn.emit("error", {"error": "not_found", "message": f"no chat {chat_id}"})
        return
    tell(members, "message", message)


def _typing(conn: easy.Connection, data: Any) -> None:
    chat_id = _chat_id(conn, data)
    members = _members(conn, chat_id) if chat_id is not None else None
    if members is not None:
        user = conn.locals["user"]
        others = [m for m in members if m != user["id"]]
        tell(others, "typing", {"chat_id": chat_id, "user_id": user["id"], "name": user["name"]})


def _read(conn: easy.Connection, data: Any) -> None:
    chat_id = _chat_id(conn, data)
    message_id = data.get("message_id") if isinstance(data, dict) else None
    if chat_id is None:
        return
    if not isinstance(message_id, int) or isinstance(message_id, bool):
        conn.emit("error", {"error": "bad_request", "message": "message_id must be an integer"})
        return
    user_id = conn.locals["user"]["id"]
    try:
        with db_session:
            moved = store.mark_read(chat_id, user_id, message_id)
    except store.NotMember:
        conn.emit("error", {"error": "not_found", "message": f"no chat {chat_id}"})
        return
    if moved is not None:
        mark, members = moved
        tell(members, "read", {"chat_id": chat_id, "user_id": user_id, "message_id": mark})


def _call(conn: easy.Connection, data: Any, event: str) -> None:
    chat_id = _chat_id(conn, data)
    members = _members(conn, chat_id) if chat_id is not None else None
    if chat_id is None or members is None:
        return
    user = conn.locals["user"]
    room = _call_room(chat_id)
    if event in ("call_invite", "call_accept"):
        previous = conn.locals.get("call")
        if previous is not None and previous != chat_id:
            _end_call(conn, previous)
        conn.locals["call"] = chat_id
        voice.relay_room(room)  # this worker relays what its members send; idempotent
        voice.join(room, conn.channel)
    elif event == "call_end":
        if conn.locals.get("call") != chat_id:
            return  # only someone in the call can end it for the others
        del conn.locals["call"]
        voice.leave(room, conn.channel)
    others = [m for m in members if m != user["id"]]
    tell(others, event, {"chat_id": chat_id, "from": {"id": user["id"], "name": user["name"]}})
    if event == "call_accept":
        # The callee's other tabs stop ringing too.
        tell([user["id"]], "call_taken", {"chat_id": chat_id})


def _end_call(conn: easy.Connection, chat_id: int) -> None:
    voice.leave(_call_room(chat_id), conn.channel)
    members = _members(conn, chat_id)
    if members is not None:
        user = conn.locals["user"]
        others = [m for m in members if m != user["id"]]
        tell(
            others,
            "call_end",
            {"chat_id": chat_id, "from": {"id": user["id"], "name": user["name"]}},
        )


def _call_handler(event: str) -> Any:
    def handler(conn: easy.Connection, data: Any) -> None:
        _call(conn, data, event)

    return handler


HANDLERS: dict[str, Any] = {
    "send": _send,
    "typing": _typing,
    "read": _read,
    **{event: _call_handler(event) for event in CALL_EVENTS},
}
