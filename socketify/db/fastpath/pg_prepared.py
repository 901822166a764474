"""PostgreSQL: the primary-key SELECT as a server-side prepared statement, per connection.

Theory of operation. psycopg2 sends every statement as text, so the server parses and plans
`SELECT ... WHERE "id" = 1` on every request, a large share of the backend's CPU time for a
primary-key read. `PreparedSelect` prepares the loader's statement once per connection
(`PREPARE name AS ...`, `$1` for the key) and then sends `EXECUTE name(key)`: the server
reuses the parsed statement and, after a few executions, its plan.

It runs only where it cannot change what a request sees: a read in autocommit mode (outside
any transaction, so a failure aborts nothing) on one of our `GreenConnection`s, which remember
what was prepared on them. A failure of the prepared path on a connection that is still
open — a schema change that alters the result's type, a pooler (PgBouncer in transaction
mode) that does not keep prepared statements — switches it off for good in this process, and
the caller runs the statement as plain text: that run's errors are the ones the request
sees. A lost connection raises the driver's error to the caller, which reconnects as Pony
would for its own statement (and prepares again on the new connection).
`db.last_sql` and the query statistics keep showing the SELECT.

A statement's name is a digest of its text, never a counter: behind a pooler that hands
server connections from client to client, a name prepared by another process (or another
app) is then the same statement, never a different one answering under our name.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

__all__ = ["PreparedSelect"]

log = logging.getLogger("socketify.db")


class PreparedSelect:
    """One SELECT with a single key parameter, prepared on each connection at first use."""

    def __init__(self, sql: str, placeholder: str) -> None:
        statement = sql.replace(placeholder, "$1")
        digest = hashlib.sha256(statement.encode()).hexdigest()[:32]
        self.name = f"socketify_pk_{digest}"
        self.prepare_sql = f"PREPARE {self.name} AS {statement}"
        self.execute_sql = f"EXECUTE {self.name}(%s)"
        self.enabled = True

    @classmethod
    def for_statement(cls, sql: str, shape: Any) -> PreparedSelect | None:
        """A prepared form of `sql` whose one parameter is named `shape` (psycopg2's
        `%(name)s`); None when the statement is not of that form."""
        if type(shape) is not str:
            return None
        placeholder = f"%({shape})s"
        if sql.count("%") != 1 or placeholder not in sql:
            return None  # another parameter or a literal percent sign: leave it as text
        return cls(sql, placeholder)

    def run(self, connection: Any, cursor: Any, key: Any) -> bool:
        """Execute the statement for `key`; False (nothing sent, or the server refused it)
        when the caller must run it as text. A lost connection raises the driver's error."""
        prepared = getattr(connection, "prepared_statements", None)
        if prepared is None or not self.enabled or not connection.autocommit:
            return False
        try:
            if self.name not in prepared:
                cursor.execute(self.prepare_sql)
                prepared.add(self.name)
            cursor.execute(self.execute_sql, (key,))
        except Exception as exc:
            prepared.discard(self.name)
            if connection.closed:
                raise  # the connection is lost: the caller reconnects, as for its own statement
            # The server refused the statement itself: stop preparing it, run it as text.
            self.enabled = False
            log.info("prepared primary-key reads switched off: %s", exc)
            return False
        return True
