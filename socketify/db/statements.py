"""`db.statement(sql)`: raw SQL prepared once, run with positional values, rows as tuples.

    read_world = db.statement("SELECT id, randomnumber FROM world WHERE id = $1")
    write_world = db.statement("UPDATE world SET randomnumber = $2 WHERE id = $1")

    @server.get("/worlds/:id")
    def show(req, res):
        found = read_world.one(int(req.params["id"]))      # a tuple, or None
        res.json({"id": found[0], "randomNumber": found[1]})

    write_world.run_many([(1, 42), (2, 7)])   # PostgreSQL: both in one round trip

Parameters are `$1`, `$2`, ... on every dialect (PostgreSQL's own numbering); values are passed
positionally and never spliced into the SQL text. Rows are the driver's tuples.

Theory of operation. On PostgreSQL the statement is prepared on each pooled connection the
first time it runs there (`PREPARE name AS <sql>`, then `EXECUTE name(...)`): the server parses
and plans it once per connection instead of on every call. The name is a digest of the text,
so two processes (or a pooler handing server connections around) that prepare the same name
prepare the same statement. A server that refuses `PREPARE` (a pooler in transaction mode)
switches preparing off for that statement in this process; it then runs as text. SQLite and
MySQL run it as text, with the parameters translated to the driver's style once.

Where it runs follows Pony's rules for the `db_session` it is called in, so raw statements and
entities see the same data:

* a read (`one`, `all`) in a session that has not used this database yet, and that starts no
  transaction (not `immediate`, not `serializable`), takes a pooled connection for that one
  statement, in autocommit mode as Pony would read at the start of such a session, and gives
  it back at once;
* a read in a session that has used the database runs on the session's connection, after
  Pony flushes the session's pending changes, inside its transaction if one is open;
* a write (`run`, `run_many`) joins the session's transaction (Pony's `db.get_connection()`),
  which the session commits when it ends, or rolls back on error.

`one_each(rows)` runs a read once per row of values; on PostgreSQL with psycopg 3 installed,
in a session that would borrow a connection for it, all of them travel in one round trip
(libpq's pipeline mode, see socketify.db.pipeline), each still a statement of its own.

`run_many` sends N executions as one multi-statement text on PostgreSQL (psycopg2's
`execute_batch`): each row is still its own statement, but they travel in one round trip per
`page_size` rows. Elsewhere it is the driver's `executemany`.

Errors are Pony's: a driver error is raised as the matching `pony.orm` exception (so the
database middleware maps it as it does for entities). Outside a `db_session`, a statement
raises Pony's `TransactionError`, as `Entity[pk]` does. These statements do not appear in
`db.local_stats`.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any

from pony.orm import core
from pony.orm.dbapiprovider import wrap_dbapi_exceptions
from pony.utils import throw

__all__ = ["Statement", "raise_translated"]

log = logging.getLogger("socketify.db")

_PARAMETER = re.compile(r"\$(\d+)")
# Rows `run_many` sends in one round trip on PostgreSQL.
PAGE_SIZE = 100


class Statement:
    """One SQL statement with `$1`, `$2`, ... parameters, bound to a database."""

    def __init__(self, db: Any, sql: str) -> None:
        self.db = db
        self.sql = sql
        numbers = [int(n) for n in _PARAMETER.findall(sql)]
        self.arity = max(numbers, default=0)
        if sorted(set(numbers)) != list(range(1, self.arity + 1)):
            raise ValueError(f"parameters must be numbered $1..$N without gaps: {sql!r}")
        dialect = db.url.dialect
        self.postgres = dialect == "postgres"
        self.prepared_name: str | None = None
        if self.postgres:
            self.prepared_name = f"socketify_s_{_digest(sql)}"
            self.prepare_sql = f"PREPARE {self.prepared_name} AS {sql}"
            placeholders = ", ".join(["%s"] * self.arity)
            self.execute_sql = (
                f"EXECUTE {self.prepared_name}({placeholders})"
                if self.arity
                else f"EXECUTE {self.prepared_name}"
            )
        if dialect == "sqlite":
            self.text_sql = _PARAMETER.sub(r"?\1", sql)  # SQLite numbers its `?NNN` itself
            self.order: tuple[int, ...] | None = None
        else:
            # psycopg2 and PyMySQL: `%s` in order of appearance; a literal `%` doubled.
            self.text_sql = _PARAMETER.sub("%s", sql.replace("%", "%%"))
            self.order = tuple(numbers)

    def __repr__(self) -> str:
        return f"<socketify.db.Statement {self.sql!r}>"

    def one(self, *values: Any) -> tuple[Any, ...] | None:
        """The first row the statement returns, or None when it returns none."""
        return self._read(values, first=True)

    def all(self, *values: Any) -> list[tuple[Any, ...]]:
        """Every row the statement returns, as a list of tuples."""
        return self._read(values, first=False)

    def one_each(self, rows: Iterable[Sequence[Any]]) -> list[tuple[Any, ...] | None]:
        """`one(*values)` for each row of values, in order; on PostgreSQL with psycopg 3,
        sent in one round trip when the session allows it (socketify.db.pipeline)."""
        batch = [tuple(row) for row in rows]
        for row in batch:
            self._check(row)
        if batch and self.postgres:
            session = _session()
            if (
                self.db not in core.local.db2cache
                and not session.immediate
                and not session.serializable
                and (reads := self.db.pipeline_reads()) is not None
            ):
                name = self.prepared_name or f"socketify_s_{_digest(self.sql)}"
                return reads.one_each(name, self.sql, batch)
        return [self.one(*row) for row in batch]

    def run(self, *values: Any) -> int:
        """Run a write in the session's transaction; the number of rows it affected."""
        self._check(values)
        connection = self.db.get_connection()  # Pony's: the session's, transaction begun
        cursor = connection.cursor()
        self._execute(connection, cursor, values)
        return int(cursor.rowcount)

    def run_many(self, rows: Iterable[Sequence[Any]], page_size: int = PAGE_SIZE) -> None:
        """Run the statement once per row of values in the session's transaction, sending
        `page_size` executions per round trip on PostgreSQL."""
        batch = [tuple(row) for row in rows]
        for row in batch:
            self._check(row)
        if not batch:
            return
        connection = self.db.get_connection()
        cursor = connection.cursor()
        try:
            if self.prepared_name is not None and self._prepare(connection, cursor):
                from psycopg2.extras import execute_batch

                execute_batch(cursor, self.execute_sql, batch, page_size=page_size)
            else:
                cursor.executemany(self.text_sql, [self._text_values(row) for row in batch])
        except Exception as error:
            raise_translated(self.db.provider, error)

    # -- running --------------------------------------------------------------------------------

    def _check(self, values: Sequence[Any]) -> None:
        if len(values) != self.arity:
            raise TypeError(f"{self!r} takes {self.arity} values, {len(values)} given")

    def _read(self, values: tuple[Any, ...], first: bool) -> Any:
        self._check(values)
        db = self.db
        session = _session()
        cache = core.local.db2cache.get(db)
        if cache is None and not session.immediate and not session.serializable:
            return self._read_borrowed(values, first)
        connection = (
            db.get_connection()  # Pony's: this session starts a transaction anyway
            if cache is None
            else cache.prepare_connection_for_query_execution()  # flushes pending changes
        )
        cursor = connection.cursor()
        self._execute(connection, cursor, values)
        if cache is not None and cache.immediate:
            cache.in_transaction = True
        return cursor.fetchone() if first else _listed(cursor.fetchall())

    def _read_borrowed(self, values: tuple[Any, ...], first: bool, retry: bool = True) -> Any:
        """Read on a pooled connection taken for this one statement, in autocommit mode."""
        provider = self.db.provider
        pool = provider.pool
        connection, _ = provider.connect()  # a pool slot; `@db.on_connect` hooks for a new one
        try:
            if self.postgres and not connection.autocommit:
                connection.autocommit = True  # as Pony reads before a session writes
            cursor = connection.cursor()
            self._execute(connection, cursor, values)
            found = cursor.fetchone() if first else _listed(cursor.fetchall())
        except Exception as exc:
            if retry and provider.should_reconnect(getattr(exc, "original_exc", exc)):
                pool.drop(connection)  # the server went away: one more try, as Pony would
                return self._read_borrowed(values, first, retry=False)
            pool.release(connection)  # resets it, or discards it when that fails
            raise
        except BaseException:
            pool.drop(connection)  # interrupted mid-statement (a timeout): state unknown
            raise
        pool.release(connection)
        return found

    def _execute(self, connection: Any, cursor: Any, values: tuple[Any, ...]) -> None:
        try:
            if self.prepared_name is not None and self._prepare(connection, cursor):
                cursor.execute(self.execute_sql, values)
            else:
                cursor.execute(self.text_sql, self._text_values(values))
        except Exception as error:
            raise_translated(self.db.provider, error)

    def _prepare(self, connection: Any, cursor: Any) -> bool:
        """Prepare the statement on `connection` unless it is already; False when it must run
        as text (preparing refused, or a connection that does not track what it prepared)."""
        prepared = getattr(connection, "prepared_statements", None)
        if prepared is None or self.prepared_name is None:
            return False
        if self.prepared_name in prepared:
            return True
        try:
            # Inside a transaction a refused PREPARE would abort it: mark a savepoint first.
            in_transaction = not connection.autocommit
            if in_transaction:
                cursor.execute("SAVEPOINT socketify_prepare")
            try:
                cursor.execute(self.prepare_sql)
            except Exception:
                if in_transaction and not connection.closed:
                    cursor.execute("ROLLBACK TO SAVEPOINT socketify_prepare")
                raise
            if in_transaction:
                cursor.execute("RELEASE SAVEPOINT socketify_prepare")
        except Exception as exc:
            if connection.closed:
                raise  # the connection is lost: the caller's error
            log.info("statement not prepared, run as text: %s (%s)", self.sql, exc)
            self.prepared_name = None
            return False
        prepared.add(self.prepared_name)
        return True

    def _text_values(self, values: Sequence[Any]) -> Sequence[Any]:
        if self.order is None:
            return values
        return tuple(values[n - 1] for n in self.order)


def _digest(sql: str) -> str:
    """A statement's name: the same text gets the same name in every process."""
    return hashlib.sha256(sql.encode()).hexdigest()[:32]


def _session() -> Any:
    """The greenlet's `db_session`; Pony's error outside one."""
    session = core.local.db_session
    if session is None:
        throw(core.TransactionError, "db_session is required when working with the database")
    return session


def _listed(rows: Any) -> list[tuple[Any, ...]]:
    """The rows as a list: PyMySQL's `fetchall` returns a tuple of them."""
    return rows if type(rows) is list else list(rows)


@wrap_dbapi_exceptions
def raise_translated(provider: Any, error: Exception) -> None:
    """Raise `error` inside Pony's decorator, which turns a driver error into Pony's own."""
    raise error
