"""`socketify.db`: Pony ORM on SQLite, PostgreSQL and MySQL, safe under pre-fork and gevent.

    import socketify.db
    from pony.orm import Required

    db = socketify.db.connect("sqlite:///app.db", pool_size=8, pool_timeout=5)

    class User(db.Entity):
        name = Required(str, max_len=80)

    db.generate_mapping(create_tables=True)
    server.use(socketify.db.middleware(db))       # one db_session per request

Also: `socketify.db.migrations` (versioned up/down migrations, `socketify db migrate`) and
`socketify.db.documents` (a document store on memory, SQLite, PostgreSQL or MongoDB).

`User[1]` on these entities is Pony's, built in fewer steps (`socketify.db.fastload`), and
reading a loaded value (`user.name`) is Pony's read in one call (`socketify.db.attributes`);
`socketify.db.get_row(User, 1)` reads the same row as a plain dict, without an entity object,
for read-only answers where every microsecond counts.
"""

from __future__ import annotations

from socketify.db.database import DEFAULT_URL, Database, connect
from socketify.db.errors import ErrorAnswer, answer_for
from socketify.db.middleware import middleware, transactional
from socketify.db.pool import BoundedPool, DatabaseUnavailable, PoolStats, PoolTimeout
from socketify.db.rows import get_row
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
    "answer_for",
    "connect",
    "get_row",
    "middleware",
    "parse_url",
    "transactional",
]
