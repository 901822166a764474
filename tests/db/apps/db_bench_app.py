"""Benchmark app for the database bar: /ping (no database) and /users/:id (one primary-key
select in a db_session), in the same server so both are measured in the same run.

    DB_URL=sqlite:////tmp/bench.db socketify run db_bench_app:server --workers 1
    wrk -t1 -c64 -d10s http://127.0.0.1:PORT/ping ; wrk ... /users/1
    python tests/db/apps/db_bench.py        # all of it, interleaved, SQLite and PostgreSQL
"""

from __future__ import annotations

import os

from pony.orm import Required, db_session

import socketify.db
from socketify import Request, Response, Server

db = socketify.db.connect(os.environ["DB_URL"], pool_size=int(os.environ.get("POOL_SIZE", "8")))


class User(db.Entity):
    name = Required(str)


db.generate_mapping(create_tables=True)
with db_session:
    if not User.exists(id=1):
        User(id=1, name="Ann")

server = Server()


@server.get("/ping")
def ping(req: Request, res: Response) -> None:
    res.json({"ok": True})


def get_user(req: Request, res: Response) -> None:
    user = User[int(req.params["id"])]
    res.json({"id": user.id, "name": user.name})


def get_user_raw(req: Request, res: Response) -> None:
    row = db.select(RAW_SELECT, {}, {"ident": int(req.params["id"])})
    res.json({"id": row[0][0], "name": row[0][1]})


RAW_SELECT = f"SELECT id, name FROM {db.provider.quote_name(User._table_)} WHERE id = $ident"
server.get("/users/:id", get_user).use(socketify.db.middleware(db))
server.get("/raw/users/:id", get_user_raw).use(socketify.db.middleware(db))
