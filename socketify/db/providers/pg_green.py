"""The pool's psycopg2 connections: they keep their gevent watchers between queries.

psycopg2's wait callback (socketify.drivers.psycopg2_wait, installed in every worker) parks a
query's greenlet on the connection's socket. PERF: a `GreenConnection` keeps the two watchers
it waits on from one query to the next, instead of one made per wait.
"""

from __future__ import annotations

from typing import Any

import psycopg2.extensions as extensions

__all__ = ["GreenConnection", "close_watchers"]


class GreenConnection(extensions.connection):
    """A psycopg2 connection that keeps its gevent watchers and, for the fast path, its
    prepared statements and a cursor for the primary-key reads."""

    __slots__ = ("green_watchers", "key_read_cursor", "prepared_statements")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # connecting waits the usual way: libpq may try
        # several addresses, each on a socket of its own, so the descriptor is not final yet.
        # (hub, read watcher, write watcher), made on the first wait once connected.
        self.green_watchers: tuple[Any, Any, Any] | None = None
        # Names of the statements prepared on this connection (see fastpath.pg_prepared).
        self.prepared_statements: set[str] = set()
        # PERF: the cursor the fast path's key reads run on (fastpath.loader), made once: a
        # psycopg2 cursor costs more to make than the Python side of the read it serves. Its
        # results are one row, read at once; it is cleared when the connection is closed (a
        # cursor refers to its connection: the pair is a cycle while both live).
        self.key_read_cursor: Any = None


def close_watchers(con: Any) -> None:
    """Close the watchers a connection kept (before the connection itself is closed)."""
    watchers = getattr(con, "green_watchers", None)
    if watchers is not None:
        con.green_watchers = None
        watchers[1].close()
        watchers[2].close()
