"""Ripple's REST API under `/api`: accounts, chats, history, uploads, typing and receipts.

Every route but register and login wants a signed-in session and answers 401 without one.
Bodies are JSON, checked with `socketify.validate` (422 with the field errors). A chat that
does not exist and a chat the user is not in are the same 404. What changes a chat (a new
message, a read mark, typing) is told to its members' open pages through `live.tell`.

    POST /api/register {name, password}    201 {id, name}          409 name taken
    POST /api/login    {name, password}    200 {id, name}          401
    POST /api/logout                       204
    GET  /api/me                           200 {id, name}
    GET  /api/users?q=                     200 [{id, name, online}]
    GET  /api/chats                        200 [chat]  (members, last_message, unread)
    POST /api/chats/dm    {user_id}        201 chat (200 when it existed)
    POST /api/chats/group {title, member_ids}   201 chat
    GET  /api/chats/:id/messages?before=&limit=   200 {messages (oldest first), has_more}
    POST /api/chats/:id/messages {text, file?}    201 message
    POST /api/chats/:id/typing             204
    POST /api/chats/:id/read {message_id}  204
    POST /api/upload (raw bytes)           201 {url, name, mime, size}
    GET  /uploads/:name                    the file

Guide: docs/guide/request-response.md, docs/guide/database.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from examples.ripple import store, uploads
from examples.ripple.live import is_online, tell
from socketify import Request, Response, validate
from socketify.validate import field

__all__ = ["ROUTES", "signed_in"]

Handler = Callable[[Request, Response], None]

NAME = r"[A-Za-z0-9_.-]{2,32}"
CREDENTIALS = [
    field("name").required().string().matches(NAME),
    field("password").required().string().min(8).max(200),
]
DIRECT = [field("user_id").required().integer().min(1)]
GROUP = [
    field("title").required().string().min(1).max(64),
    field("member_ids").required().array().max(store.MAX_GROUP),
]
MESSAGE = [field("text").string().max(store.MAX_TEXT), field("file").object()]
READ = [field("message_id").required().integer().min(0)]


def signed_in(req: Request) -> dict[str, Any] | None:
    """The session's user `{id, name}`, or None."""
    user = req.session.get("user")
    return user if isinstance(user, dict) else None


def _me(req: Request, res: Response) -> int | None:
    user = signed_in(req)
    if user is None:
        res.json_error(401, "sign in first")
        return None
    return int(user["id"])


def _chat_param(req: Request, res: Response) -> int | None:
    raw = req.params["id"]
    if not raw.isdigit():
        res.json_error(404, "no such chat")
        return None
    return int(raw)


@validate.body(CREDENTIALS)
def register(req: Request, res: Response) -> None:
    """Create an account and sign in."""
    body = req.locals["body"]
    try:
        user = store.register(body["name"], body["password"])
    except store.NameTaken:
        res.json_error(409, "that name is taken")
        return
    req.session.regenerate()  # a new id for the signed-in session: no fixation
    req.session["user"] = user
    res.status(201).json(user)


@validate.body(CREDENTIALS)
def login(req: Request, res: Response) -> None:
    """Sign in."""
    body = req.locals["body"]
    user = store.authenticate(body["name"], body["password"])
    if user is None:
        res.json_error(401, "wrong name or password")
        return
    req.session.regenerate()
    req.session["user"] = user
    res.json(user)


def logout(req: Request, res: Response) -> None:
    """Sign out (the session is destroyed everywhere)."""
    req.session.destroy()
    res.send_status(204)


def me(req: Request, res: Response) -> None:
    """Who is signed in."""
    if _me(req, res) is not None:
        res.json(signed_in(req))


def list_users(req: Request, res: Response) -> None:
    """Find people to talk to."""
    me = _me(req, res)
    if me is not None:
        res.json(store.users(me, req.query.get("q", "")[:32], is_online))


def list_chats(req: Request, res: Response) -> None:
    """The signed-in user's chats, most recent first, with unread counts."""
    me = _me(req, res)
    if me is not None:
        res.json(store.chats_of(me, is_online))


@validate.body(DIRECT)
def open_direct(req: Request, res: Response) -> None:
    """The direct chat with one user, made on first use."""
    me = _me(req, res)
    if me is None:
        return
    try:
        chat, created = store.open_direct(me, req.locals["body"]["user_id"], is_online)
    except store.NotMember:
        res.json_error(404, "no such user")
        return
    if created:
        tell([m["id"] for m in chat["members"] if m["id"] != me], "chat", {"id": chat["id"]})
    res.status(201 if created else 200).json(chat)


@validate.body(GROUP)
def create_group(req: Request, res: Response) -> None:
    """A group chat of the signed-in user and the given users."""
    me = _me(req, res)
    if me is None:
        return
    body = req.locals["body"]
    ids = body["member_ids"]
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        res.status(422).json(
            {"error": "validation failed", "errors": {"member_ids": ["must hold user ids"]}}
        )
        return
    chat = store.create_group(me, body["title"].strip(), ids, is_online)
    tell([m["id"] for m in chat["members"] if m["id"] != me], "chat", {"id": chat["id"]})
    res.status(201).json(chat)


def list_messages(req: Request, res: Response) -> None:
    """One page of history, `before` a message id, `limit` at most 100."""
    me, chat_id = _me(req, res), _chat_param(req, res)
    if me is None or chat_id is None:
        return
    before, limit = req.query.get("before", ""), req.query.get("limit", str(store.PAGE))
    if (before and not before.isdigit()) or not limit.isdigit():
        res.json_error(400, "before and limit are whole numbers")
        return
    try:
        res.json(store.history(chat_id, me, int(before) if before else None, int(limit)))
    except store.NotMember:
        res.json_error(404, "no such chat")


@validate.body(MESSAGE)
def send_message(req: Request, res: Response) -> None:
    """Post a message (text, an uploaded file, or both)."""
    me, chat_id = _me(req, res), _chat_param(req, res)
    if me is None or chat_id is None:
        return
    body = req.locals["body"]
    text = str(body.get("text") or "").strip()
    attachment = uploads.checked_file(body["file"]) if body.get("file") is not None else None
    if body.get("file") is not None and attachment is None:
        res.json_error(422, "file: not an upload of ours")
        return
    if not text and attachment is None:
        res.json_error(422, "a message needs text or a file")
        return
    try:
        message, members = store.post(chat_id, me, text, attachment)
    except store.NotMember:
        res.json_error(404, "no such chat")
        return
    tell(members, "message", message)
    res.status(201).json(message)


def typing(req: Request, res: Response) -> None:
    """Tell the chat's other members that the signed-in user is typing."""
    me, chat_id = _me(req, res), _chat_param(req, res)
    if me is None or chat_id is None:
        return
    try:
        members = store.member_ids(chat_id, me)
    except store.NotMember:
        res.json_error(404, "no such chat")
        return
    name = req.session["user"]["name"]
    tell(
        [m for m in members if m != me], "typing", {"chat_id": chat_id, "user_id": me, "name": name}
    )
    res.send_status(204)


@validate.body(READ)
def read(req: Request, res: Response) -> None:
    """Move the signed-in user's read mark forward in a chat."""
    me, chat_id = _me(req, res), _chat_param(req, res)
    if me is None or chat_id is None:
        return
    try:
        moved = store.mark_read(chat_id, me, req.locals["body"]["message_id"])
    except store.NotMember:
        res.json_error(404, "no such chat")
        return
    if moved is not None:
        mark, members = moved
        tell(members, "read", {"chat_id": chat_id, "user_id": me, "message_id": mark})
    res.send_status(204)


def upload(req: Request, res: Response) -> None:
    """Store the request body as a file the signed-in user can attach to messages."""
    if _me(req, res) is None:
        return
    req.limit_body(uploads.MAX_UPLOAD)
    data = req.body
    if not data:
        res.json_error(422, "an upload needs a body")
        return
    attachment = uploads.save(data, req.content_type, req.header("x-file-name"))
    res.status(201).json(attachment)


def download(req: Request, res: Response) -> None:
    """An uploaded file, to signed-in users only."""
    if _me(req, res) is None:
        return
    path = uploads.path_of(req.params["name"])
    if path is None:
        res.json_error(404, "no such file")
        return
    mime = uploads.MIME_OF[path.suffix]
    res.set_header("Content-Type", mime)
    res.set_header("X-Content-Type-Options", "nosniff")
    res.set_header("Content-Security-Policy", "sandbox; default-src 'none'")
    res.set_header("Cache-Control", "private, max-age=86400, immutable")
    res.send_file(path, download=not mime.startswith(("image/", "audio/")))


ROUTES: list[tuple[str, str, Handler]] = [
    ("POST", "/api/register", register),
    ("POST", "/api/login", login),
    ("POST", "/api/logout", logout),
    ("GET", "/api/me", me),
    ("GET", "/api/users", list_users),
    ("GET", "/api/chats", list_chats),
    ("POST", "/api/chats/dm", open_direct),
    ("POST", "/api/chats/group", create_group),
    ("GET", "/api/chats/:id/messages", list_messages),
    ("POST", "/api/chats/:id/messages", send_message),
    ("POST", "/api/chats/:id/typing", typing),
    ("POST", "/api/chats/:id/read", read),
    ("POST", "/api/upload", upload),
    ("GET", "/uploads/:name", download),
]
