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

`PreparedQuery` does the same for any other SELECT that reaches the provider in autocommit
mode: Pony's own queries (`Entity.select()`) and raw `db.select` / `db.get`, whose named
parameters (`%(p1)s`) become `$1`, `$2`... A statement is prepared from the second time its
text is seen in the process (SQL built with inlined values is never seen twice, so it stays
text and prepares nothing), and a connection holds at most `MAX_PER_CONNECTION` of them.
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any

__all__ = ["MAX_PER_CONNECTION", "PreparedQuery", "PreparedSelect", "prepared_query"]

log = logging.getLogger("socketify.db")

# Statements one connection keeps prepared on the server; past that, queries run as text.
MAX_PER_CONNECTION = 256
# Distinct query texts this process remembers (seen once, or prepared); past that, new texts
# run as text.
MAX_QUERIES = 1024
_NAMED_PARAMETER = re.compile(r"%\((\w+)\)s")
_SEEN_ONCE = object()  # a text seen once: prepared if it comes again
_queries: dict[str, Any] = {}  # query text -> _SEEN_ONCE, a PreparedQuery, or None (never)


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


class PreparedQuery:
    """A SELECT with named parameters (none or several), prepared on each connection at first
    use; `enabled` turns False for good when the server refuses it."""

    def __init__(self, sql: str, names: list[str]) -> None:
        numbers = {name: n for n, name in enumerate(names, 1)}
        statement = _NAMED_PARAMETER.sub(lambda match: f"${numbers[match[1]]}", sql)
        digest = hashlib.sha256(statement.encode()).hexdigest()[:32]
        self.name = f"socketify_q_{digest}"
        self.prepare_sql = f"PREPARE {self.name} AS {statement}"
        values = ", ".join(f"%({name})s" for name in names)
        self.execute_sql = f"EXECUTE {self.name}({values})" if names else f"EXECUTE {self.name}"
        self.enabled = True

    @classmethod
    def for_statement(cls, sql: str) -> PreparedQuery | None:
        """The prepared form of a SELECT whose parameters are all named; None for anything
        else (another statement, a positional parameter, a literal percent sign)."""
        if sql.lstrip()[:6].lower() != "select":
            return None
        if "%" in _NAMED_PARAMETER.sub("", sql):
            return None
        return cls(sql, list(dict.fromkeys(_NAMED_PARAMETER.findall(sql))))

    def run(self, connection: Any, cursor: Any, arguments: Any) -> bool:
        """Execute the statement with `arguments` (a dict, or None); False (nothing sent, or
        the server refused it) when the caller must run it as text. A lost connection
        raises the driver's error."""
        prepared = getattr(connection, "prepared_statements", None)
        if prepared is None or not self.enabled or not connection.autocommit:
            return False
        try:
            if self.name not in prepared:
                if len(prepared) >= MAX_PER_CONNECTION:
                    return False
                cursor.execute(self.prepare_sql)
                prepared.add(self.name)
            cursor.execute(self.execute_sql, arguments)
        except Exception as exc:
            prepared.discard(self.name)
            if connection.closed:
                raise
            self.enabled = False
            log.info("prepared reads of one statement switched off: %s", exc)
            return False
        return True


def prepared_query(sql: str) -> PreparedQuery | None:
    """The prepared form of `sql` once its text has been seen before, else None."""
    known = _queries.get(sql)
    if known is None and sql not in _queries:
        if len(_queries) < MAX_QUERIES:
            _queries[sql] = _SEEN_ONCE
        return None
    if known is _SEEN_ONCE:
        known = _queries[sql] = PreparedQuery.for_statement(sql)
    return known
