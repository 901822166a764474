"""The database bar's app: `DB_URL=... socketify run load_tests.apps.db_users:server`.

`/ping` is the same answer as `ping.py` and touches no database; `/users/:id` runs, through
`socketify.db.middleware(db)`, one `db_session` with one primary-key select (`User[id]`) and
answers the user as JSON. `/users/:id/row` is the same read through `socketify.db.get_row`
(the row as a dict, no entity object): the documented read-only fast path.
`/users/:id/driver` is the driver ceiling: the same SELECT through the database driver alone,
nothing of socketify.db or Pony on the request path — one `sqlite3` connection per worker
(WAL, as `socketify.db.connect` opens them), or a per-worker gevent queue of at most
`POOL_SIZE` psycopg2 connections in autocommit mode that wait with socketify.db's gevent
callback (`application_name` gets a `_driver` suffix, so they are not counted as the pool's).
It shows what the database costs before any ORM, not a route the bar measures.
All live in one server so they are measured in the same run.
`DB_URL` picks the database (`sqlite:////tmp/x.db`, `postgres://...?schema=...`), `POOL_SIZE`
the pool (default 8). The table is created and user 1 inserted at import, in every process
that imports the app, so the first request already finds them.
"""

import os
import sqlite3
from typing import Any

from pony.orm import Required, db_session

import socketify.db
from socketify import Server

POOL_SIZE = int(os.environ.get("POOL_SIZE", "8"))
db = socketify.db.connect(os.environ["DB_URL"], pool_size=POOL_SIZE)


class User(db.Entity):
    name = Required(str, max_len=80)
    email = Required(str, max_len=120)


db.generate_mapping(create_tables=True)
with db_session:
    if User.get(id=1) is None:
        User(id=1, name="Ann", email="ann@example.com")

server = Server(compression=False)


@server.get("/ping")
def ping(req, res):
    res.set_header("Content-Type", "application/json")
    res.send(b'{"ok":true}')


def get_user(req, res):
    user = User[int(req.params["id"])]
    res.json({"id": user.id, "name": user.name, "email": user.email})


server.get("/users/:id", get_user).use(socketify.db.middleware(db))


def get_user_row(req, res):
    res.json(socketify.db.get_row(User, int(req.params["id"])))


server.get("/users/:id/row", get_user_row).use(socketify.db.middleware(db))


# -- the driver ceiling -------------------------------------------------------------------------

# The columns Pony maps the entity to; the placeholder is each driver's own.
POSTGRES_SQL = f'SELECT id, name, email FROM "{User._table_}" WHERE id = %s'
SQLITE_SQL = POSTGRES_SQL.replace("%s", "?")


class DriverPool:
    """At most `size` psycopg2 connections of this worker, opened when first needed."""

    def __init__(self, size: int) -> None:
        from gevent.queue import LifoQueue  # here: the worker has monkey-patched by now

        self.idle: Any = LifoQueue()
        self.size = size
        self.opened = 0

    def take(self) -> Any:
        """An idle connection, a new one while fewer than `size` exist, else wait for one."""
        if self.idle.empty() and self.opened < self.size:
            self.opened += 1
            try:
                return _open_postgres()
            except BaseException:
                self.opened -= 1
                raise
        return self.idle.get()

    def give(self, con: Any) -> None:
        """Put a connection back; one the server closed is forgotten (a new one replaces it)."""
        if con.closed:
            self.opened -= 1
        else:
            self.idle.put(con)


def _open_postgres() -> Any:
    import psycopg2

    from socketify.drivers import cooperate_with_gevent

    cooperate_with_gevent()  # socketify.db's wait callback: queries park the greenlet
    params = dict(db.url.params)
    params["application_name"] = params.get("application_name", "socketify") + "_driver"
    if db.url.schema is not None:
        params["options"] = f"-c search_path={db.url.schema}"
    con = psycopg2.connect(**params)
    con.autocommit = True
    return con


def _open_sqlite() -> sqlite3.Connection:
    con = sqlite3.connect(
        db.url.params["filename"],
        timeout=db.url.params["timeout"],
        isolation_level=None,
        check_same_thread=False,
    )
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA synchronous = NORMAL")
    con.execute("PRAGMA foreign_keys = true")
    return con


_driver: dict[str, Any] = {}  # this worker's sqlite3 connection or DriverPool, made lazily


def get_user_driver(req, res):
    user_id = int(req.params["id"])
    if db.dialect == "sqlite":
        con = _driver.get("sqlite")
        if con is None:
            con = _driver["sqlite"] = _open_sqlite()
        row = con.execute(SQLITE_SQL, (user_id,)).fetchone()
    else:
        pool = _driver.get("postgres")
        if pool is None:
            pool = _driver["postgres"] = DriverPool(POOL_SIZE)
        con = pool.take()
        try:
            with con.cursor() as cursor:
                cursor.execute(POSTGRES_SQL, (user_id,))
                row = cursor.fetchone()
        finally:
            pool.give(con)
    if row is None:
        res.status(404).json({"error": "not found"})
        return
    res.json({"id": row[0], "name": row[1], "email": row[2]})


server.get("/users/:id/driver", get_user_driver)
