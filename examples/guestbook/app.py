"""Guestbook: a full-stack example — JSON API, sessions, live updates over SSE, a static front end.

    socketify run examples.guestbook.app:server --bind 127.0.0.1:8080 --workers 2
    open http://127.0.0.1:8080/

Everything a worker knows is shared with the others: entries live in SQLite (Pony, through
`socketify.db`), the visitor's name in a session in the cross-worker store, and a new entry is
broadcast to every open page through an `sse.Hub` room, whichever worker holds the page.
`GUESTBOOK_DB` picks the database (default: `guestbook.db` in `examples/.data/`).

    curl -X POST localhost:8080/api/entries -d '{"name": "Ada", "message": "hello"}'
    curl localhost:8080/api/entries        # newest first
    curl -N localhost:8080/events          # event: entry, data: {"id":1,...}

Guides: docs/guide/sessions.md, docs/guide/sse.md, docs/guide/bodies.md.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import orjson
from pony.orm import Required, commit, desc

import socketify.db
from examples._data import sqlite_url
from socketify import Request, Response, Server, cors, ratelimit, static_files
from socketify import logging as access_log
from socketify.core.compression import CompressionOptions
from socketify.middleware import request_id
from socketify.realtime import sse
from socketify.state import sessions

PUBLIC = Path(__file__).resolve().parent / "public"
MAX_NAME = 40
MAX_MESSAGE = 500
PAGE = 50

db = socketify.db.connect(os.environ.get("GUESTBOOK_DB") or sqlite_url("guestbook.db"), pool_size=4)


class Entry(db.Entity):
    name = Required(str, max_len=MAX_NAME)
    message = Required(str, max_len=MAX_MESSAGE)
    created_at = Required(datetime)

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "name": self.name,
            "message": self.message,
            "created_at": self.created_at.isoformat() + "Z",
        }


db.generate_mapping(create_tables=True)

server = Server(compression=CompressionOptions(min_size=256))
server.use(access_log.middleware())
server.use(request_id())
server.use(cors.middleware())
server.use(ratelimit.middleware(capacity=30, refill_per_second=5))
server.use(sessions.middleware(secret=os.environ.get("GUESTBOOK_SECRET", "change me " * 4)))
server.use(static_files.serve(str(PUBLIC), cache_max_age=60))
server.use(socketify.db.middleware(db))  # a db_session per request; Pony errors -> HTTP
hub = sse.Hub(name="guestbook")


@server.get("/api/entries")
def list_entries(req: Request, res: Response) -> None:
    newest = Entry.select().order_by(desc(Entry.id)).limit(PAGE)
    res.json([entry.as_json() for entry in newest])


@server.post("/api/entries")
def create_entry(req: Request, res: Response) -> None:
    body = req.json()
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message.strip():
        res.json_error(422, "need a 'message'")
        return
    if len(message) > MAX_MESSAGE:
        res.json_error(422, f"'message' is longer than {MAX_MESSAGE} characters")
        return
    name = body.get("name")
    if isinstance(name, str) and name.strip():
        req.session["name"] = name.strip()[:MAX_NAME]
    entry = Entry(
        name=req.session.get("name", "anonymous"),
        message=message.strip(),
        created_at=datetime.now(UTC).replace(tzinfo=None),
    )
    commit()  # before the broadcast: no page may show an entry that was rolled back
    data = entry.as_json()
    hub.broadcast("live", orjson.dumps(data).decode(), event="entry")
    res.status(201).json(data)


@server.get("/api/me")
def me(req: Request, res: Response) -> None:
    res.json({"name": req.session.get("name")})


@server.get("/events")
def events(req: Request, res: Response) -> None:
    stream = sse.upgrade(req, res, heartbeat=25)
    stream.comment("connected")
    hub.join("live", stream)
