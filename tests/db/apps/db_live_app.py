"""The live database tests' app, configured by environment (the test owns the database).

DB_URL=postgres://... POOL_SIZE=8 socketify run db_live_app:server --workers 1
"""

from __future__ import annotations

import os
import time

from pony.orm import Required, db_session, select

import socketify.db
from socketify import Request, Response, Server

db = socketify.db.connect(
    os.environ["DB_URL"],
    pool_size=int(os.environ.get("POOL_SIZE", "8")),
    pool_timeout=float(os.environ.get("POOL_TIMEOUT", "5")),
)


class User(db.Entity):
    name = Required(str)


class Note(db.Entity):
    tag = Required(str)


db.generate_mapping(create_tables=True)
with db_session:
    if not User.exists(id=1):
        User(id=1, name="Ann")

server = Server()
server.use(socketify.db.middleware(db))


@server.get("/ping")
def ping(req: Request, res: Response) -> None:
    res.send("pong")


@server.get("/users/:id")
def get_user(req: Request, res: Response) -> None:
    user = User[int(req.params["id"])]
    res.json({"id": user.id, "name": user.name})


@server.get("/hold")
def hold(req: Request, res: Response) -> None:
    """Keep a pooled connection busy for `ms` milliseconds of server-side work."""
    seconds = int(req.query.get("ms", "50")) / 1000
    if db.dialect == "postgres":
        db.select("SELECT pg_sleep($seconds)", {}, {"seconds": seconds})
    else:
        User.exists(id=1)
        time.sleep(seconds)
    res.send("done")


@server.get("/read-then-hold")
def read_then_hold(req: Request, res: Response) -> None:
    """A read, then 10 s of server-side work in the same transaction."""
    name = User[1].name
    db.select("SELECT pg_sleep(10)" if db.dialect == "postgres" else "SELECT SLEEP(10)")
    res.send(name)


@server.get("/probe/:tag")
def probe(req: Request, res: Response) -> None:
    """Create a note, pause mid-session, then report the notes this session can see."""
    tag = req.params["tag"]
    Note(tag=tag)
    time.sleep(float(req.query.get("pause", "0.2")))
    res.json(sorted(n.tag for n in select(n for n in Note)))


@server.get("/stats")
def stats(req: Request, res: Response) -> None:
    s = db.pool_stats()
    res.json(
        {
            "size": s.size,
            "in_use": s.in_use,
            "idle": s.idle,
            "peak": s.peak_in_use,
            "opened": s.opened,
            "timeouts": s.timeouts,
            "pid": os.getpid(),
        }
    )
