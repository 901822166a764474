"""Ripple's data: users, chats, their members and messages, on Pony through socketify.db.

Every function here runs inside a `db_session` (the request's, from the middleware, or one
the WebSocket handlers open) and returns plain dicts ready for JSON. Access rules live here
too: a user sees and writes only the chats they are a member of, and `NotMember` says so.

A direct chat between two users is unique: its `pair` key is their two ids in order, so two
people opening a chat with each other at the same moment on different workers meet in one
chat (the second insert is a unique-key conflict, and `open_direct` then reads the first).
Read receipts are one number per member, the id of the newest message they have seen:
unread counts and "read by" marks are both derived from it.

Guide: docs/guide/database.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from pony.orm import (
    Optional,
    PrimaryKey,
    Required,
    Set,
    TransactionIntegrityError,
    commit,
    composite_key,
    count,
    desc,
    rollback,
    select,
)

import socketify.db
from examples.ripple.passwords import hash_password, verify_password
from examples.ripple.settings import database_url

__all__ = [
    "NameTaken",
    "NotMember",
    "authenticate",
    "chat_json",
    "chats_of",
    "create_group",
    "history",
    "mark_read",
    "member_ids",
    "open_direct",
    "post",
    "register",
    "user_json",
    "users",
]

MAX_TEXT = 4000
PAGE = 30
MAX_PAGE = 100
MAX_GROUP = 50

db = socketify.db.connect(database_url(), pool_size=4)


class User(db.Entity):
    name = Required(str, max_len=32, unique=True)
    password = Required(str, max_len=200)
    created_at = Required(datetime)
    memberships = Set("Member")
    messages = Set("Message")


class Chat(db.Entity):
    kind = Required(str, max_len=8)  # "direct" or "group"
    title = Optional(str, max_len=64)
    pair = Optional(str, max_len=40, unique=True, nullable=True)  # "3:7" for a direct chat
    created_at = Required(datetime)
    members = Set("Member")
    messages = Set("Message")


class Member(db.Entity):
    chat = Required(Chat)
    user = Required(User)
    last_read = Required(int, default=0)  # id of the newest message this member has seen
    composite_key(chat, user)


class Message(db.Entity):
    id = PrimaryKey(int, auto=True)
    chat = Required(Chat, index=True)
    sender = Required(User)
    text = Optional(str, max_len=MAX_TEXT)
    file_url = Optional(str, max_len=200)
    file_name = Optional(str, max_len=200)
    file_mime = Optional(str, max_len=100)
    file_size = Optional(int)
    created_at = Required(datetime)


db.generate_mapping(create_tables=True)

Online = Callable[[int], bool]


class NameTaken(Exception):
    """Somebody registered this user name already."""


class NotMember(Exception):
    """The chat does not exist for this user: it is missing or they are not in it."""


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds") + "Z"


# -- accounts -------------------------------------------------------------------------------


def user_json(user: User, online: Online) -> dict[str, Any]:
    """A user as others see them."""
    return {"id": user.id, "name": user.name, "online": online(user.id)}


def register(name: str, password: str) -> dict[str, Any]:
    """Create an account; `NameTaken` when the name is in use (whatever its letter case)."""
    if User.get(lambda u: u.name.lower() == name.lower()) is not None:
        raise NameTaken(name)
    user = User(name=name, password=hash_password(password), created_at=_now())
    try:
        commit()
    except TransactionIntegrityError:  # registered on another worker a moment ago
        rollback()
        raise NameTaken(name) from None
    return {"id": user.id, "name": user.name}


def authenticate(name: str, password: str) -> dict[str, Any] | None:
    """The account of `name` when `password` is its password, else None."""
    user = User.get(name=name)
    if user is None:
        hash_password(password)  # the same work either way: no timing hint of who exists
        return None
    if not verify_password(password, user.password):
        return None
    return {"id": user.id, "name": user.name}


def users(me: int, query: str, online: Online, limit: int = 50) -> list[dict[str, Any]]:
    """Other users whose name contains `query` (any case), by name."""
    needle = query.lower()
    found = select(u for u in User if u.id != me and needle in u.name.lower())
    return [user_json(u, online) for u in found.order_by(User.name).limit(limit)]


# -- chats ----------------------------------------------------------------------------------


def _chat_for(chat_id: int, user_id: int) -> Chat:
    chat = Chat.get(id=chat_id)
    if chat is None or Member.get(chat=chat, user=user_id) is None:
        raise NotMember(chat_id)
    return chat


def member_ids(chat_id: int, user_id: int) -> list[int]:
    """The members of a chat `user_id` is in (`NotMember` otherwise)."""
    chat = _chat_for(chat_id, user_id)
    return sorted(m.user.id for m in chat.members)


def chat_json(chat: Chat, me: int, online: Online) -> dict[str, Any]:
    """A chat as `me` sees it: title, members with their read marks, last message, unread."""
    members = sorted(chat.members, key=lambda m: m.user.name.lower())
    mine = next(m for m in members if m.user.id == me)
    title = chat.title
    if chat.kind == "direct":
        title = next((m.user.name for m in members if m.user.id != me), "(just you)")
    last = chat.messages.select().order_by(desc(Message.id)).first()
    unread = count(
        m for m in Message if m.chat == chat and m.id > mine.last_read and m.sender.id != me
    )
    return {
        "id": chat.id,
        "kind": chat.kind,
        "title": title,
        "members": [{**user_json(m.user, online), "last_read": m.last_read} for m in members],
        "last_message": _message_json(last) if last is not None else None,
        "unread": unread,
    }


def chats_of(me: int, online: Online) -> list[dict[str, Any]]:
    """Every chat of `me`, the most recently active first."""
    chats = [chat_json(m.chat, me, online) for m in Member.select(lambda m: m.user.id == me)]
    return sorted(
        chats, key=lambda c: c["last_message"]["id"] if c["last_message"] else 0, reverse=True
    )


def open_direct(me: int, other: int, online: Online) -> tuple[dict[str, Any], bool]:
    """The direct chat of `me` and `other`, created if needed; and whether it was created."""
    if me == other or User.get(id=other) is None:
        raise NotMember(0)
    pair = f"{min(me, other)}:{max(me, other)}"
    chat = Chat.get(pair=pair)
    if chat is not None:
        return chat_json(chat, me, online), False
    chat = Chat(kind="direct", pair=pair, created_at=_now())
    Member(chat=chat, user=me)
    Member(chat=chat, user=other)
    try:
        commit()
    except TransactionIntegrityError:  # the other one opened it at the same moment
        rollback()
        return chat_json(Chat.get(pair=pair), me, online), False
    return chat_json(chat, me, online), True


def create_group(me: int, title: str, others: Iterable[int], online: Online) -> dict[str, Any]:
    """A new group chat of `me` and the existing users among `others`."""
    ids = {me, *others}
    found = list(select(u for u in User if u.id in ids))
    if len(found) > MAX_GROUP:
        raise ValueError(f"a group has at most {MAX_GROUP} members")
    chat = Chat(kind="group", title=title, created_at=_now())
    for user in found:
        Member(chat=chat, user=user)
    commit()
    return chat_json(chat, me, online)


# -- messages -------------------------------------------------------------------------------


def _message_json(message: Message) -> dict[str, Any]:
    file = None
    if message.file_url:
        file = {
            "url": message.file_url,
            "name": message.file_name,
            "mime": message.file_mime,
            "size": message.file_size,
        }
    return {
        "id": message.id,
        "chat_id": message.chat.id,
        "sender": {"id": message.sender.id, "name": message.sender.name},
        "text": message.text,
        "file": file,
        "created_at": _stamp(message.created_at),
    }


def history(chat_id: int, me: int, before: int | None = None, limit: int = PAGE) -> dict[str, Any]:
    """One page of a chat, oldest first: the `limit` messages before id `before` (or the
    newest), and whether older ones remain."""
    chat = _chat_for(chat_id, me)
    limit = max(1, min(limit, MAX_PAGE))
    query = chat.messages.select()
    if before is not None:
        query = query.filter(lambda m: m.id < before)
    page = list(query.order_by(desc(Message.id)).limit(limit + 1))
    return {
        "messages": [_message_json(m) for m in reversed(page[:limit])],
        "has_more": len(page) > limit,
    }


def post(
    chat_id: int, me: int, text: str, file: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[int]]:
    """Store a message from `me` (read by its sender at once); the message and the members
    to tell. Committed before it returns, so nobody hears of a message that may vanish."""
    chat = _chat_for(chat_id, me)
    fields: dict[str, Any] = {"text": text}
    if file is not None:
        fields.update(
            file_url=file["url"],
            file_name=file["name"],
            file_mime=file["mime"],
            file_size=file["size"],
        )
    message = Message(chat=chat, sender=me, created_at=_now(), **fields)
    message.flush()  # the INSERT, for the id; one commit keeps message and read mark together
    Member.get(chat=chat, user=me).last_read = message.id
    commit()
    return _message_json(message), sorted(m.user.id for m in chat.members)


def mark_read(chat_id: int, me: int, message_id: int) -> tuple[int, list[int]] | None:
    """Record that `me` has seen the chat up to `message_id`; the new mark and the members to
    tell, or None when nothing moved (marks only go forward, never past the newest)."""
    chat = _chat_for(chat_id, me)
    newest = chat.messages.select().order_by(desc(Message.id)).first()
    target = min(message_id, newest.id if newest is not None else 0)
    member = Member.get(chat=chat, user=me)
    if target <= member.last_read:
        return None
    member.last_read = target
    commit()
    return target, sorted(m.user.id for m in chat.members)
