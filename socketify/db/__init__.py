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
"""

from __future__ import annotations

from socketify.db.database import DEFAULT_URL, Database, connect
from socketify.db.errors import ErrorAnswer, answer_for
from socketify.db.middleware import middleware, transactional
from socketify.db.pool import BoundedPool, DatabaseUnavailable, PoolStats, PoolTimeout
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
    "middleware",
    "parse_url",
    "transactional",
]
