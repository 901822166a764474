"""The pool's psycopg2 connections: they keep the fast path's statements and cursor.

They wait cooperatively like every psycopg2 connection of a worker: through the wait callback
of socketify.drivers.psycopg2_wait, which also keeps each connection's gevent watchers.
"""

from __future__ import annotations

from typing import Any

import psycopg2.extensions as extensions

__all__ = ["GreenConnection"]


class GreenConnection(extensions.connection):
    """A psycopg2 connection that keeps, for the fast path, its prepared statements and a
    cursor for the primary-key reads."""

    __slots__ = ("key_read_cursor", "prepared_statements")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Names of the statements prepared on this connection (see fastpath.pg_prepared).
        self.prepared_statements: set[str] = set()
        # PERF: the cursor the fast path's key reads run on (fastpath.loader), made once: a
        # psycopg2 cursor costs more to make than the Python side of the read it serves. Its
        # results are one row, read at once; it is cleared when the connection is closed (a
        # cursor refers to its connection: the pair is a cycle while both live).
        self.key_read_cursor: Any = None
