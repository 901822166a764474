"""`socketify.db`: Pony ORM on SQLite, PostgreSQL and MySQL, safe under pre-fork and gevent.

    import socketify.db
    from pony.orm import Required

    db = socketify.db.connect("sqlite:///app.db", pool_size=8, pool_timeout=5)

    class User(db.Entity):
        name = Required(str, max_len=80)

    db.generate_mapping(create_tables=True)
    server.use(socketify.db.middleware(db))       # one db_session per request

Also: `socketify.db.migrations` (versioned up/down migrations in files, `socketify db
migrate`, or registered in code with `Migrator.register`) and `socketify.db.documents` (a
document store on memory, SQLite, PostgreSQL or MongoDB).

`socketify.db.get_row(User, 1)` reads a row as a plain dict (`User[1].to_dict()`), for
read-only answers.

Raw SQL: `db.statement("SELECT ... WHERE id = $1")` is made once and run per request with
`.one(...)`, `.all(...)`, `.run(...)` or `.run_many(rows)`, rows as tuples, prepared per
connection on PostgreSQL (`socketify.db.statements`). Many rows of an entity's table at
once, without an object per row: `select_columns(Entity, "a", "b")`, `get_columns(Entity,
keys, "a", "b")` (on PostgreSQL with psycopg 3, pipelined: one round trip) and
`update_rows(Entity, ["a"], [(pk, value), ...])` (`socketify.db.bulk`).

The fast path. By default `User[1]` is Pony's, built in fewer steps; reading a loaded value
(`user.name`) is Pony's read in one call; a read-only request ends its session without Pony's
commit machinery; `get_row` makes no entity object. All of that works inside Pony's internals
and lives in `socketify.db.fastpath`, behind one switch:

    db = socketify.db.connect(url, fast_path=False)   # this database: plain Pony
    SOCKETIFY_DB_FAST_PATH=0                          # every database: plain Pony

Off, everything above still works (the pool, the per-request session and its 404/409/422/503
answers, migrations, documents, gevent) on Pony's public behaviour only. The fast path also
turns itself off, with one logged warning, on a Pony release it was not verified against
(`fastpath.VERIFIED_PONY`), so upgrading Pony cannot break an application silently;
`SOCKETIFY_DB_FAST_PATH=force` takes it anyway, to try a new release with tests/db.
`db.fast_path` says which a database got.
"""

from __future__ import annotations

from socketify.db.bulk import get_columns, select_columns, update_rows
from socketify.db.database import DEFAULT_URL, Database, connect
from socketify.db.errors import ErrorAnswer, answer_for
from socketify.db.middleware import middleware, transactional
from socketify.db.pool import BoundedPool, DatabaseUnavailable, PoolStats, PoolTimeout
from socketify.db.rows import get_row
from socketify.db.statements import Statement
from socketify.db.urls import DatabaseURL, parse_url

__all__ = [
    "DEFAULT_URL",
    "BoundedPool",
    "Database",
    "DatabaseURL",
    "DatabaseUnavailable",
    "ErrorAnswer",
    "PoolStats",
    "PoolTimeout",
    "Statement",
    "answer_for",
    "connect",
    "get_columns",
    "get_row",
    "middleware",
    "parse_url",
    "select_columns",
    "transactional",
    "update_rows",
]
