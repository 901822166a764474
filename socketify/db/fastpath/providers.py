"""The pooled providers' fast calls: what Pony runs on every query, without its decorator.

Theory of operation. Pony wraps each provider call in a generic exception-translating decorator
(`wrap_dbapi_exceptions`) that costs more than the pool behind the call, and its
`set_transaction_mode` runs, decorated, at the start of every session even when a read has
nothing to set. `fast_provider_class(dialect, provider)` puts the mixin of this module for the
dialect in front of socketify.db's pooled provider (socketify.db.providers): `release` and
`execute` call the pool and the driver directly, a driver error still raised through Pony's
translation (`raise_translated`), so callers see the same Pony exceptions; a session that has
not written skips `set_transaction_mode` where Pony's would find nothing to do; and
`prepare_read`, `execute_plain` and `prepared_select` serve the compiled primary-key read
(`fastpath.loader`) and `get_row` (`fastpath.rows`). On PostgreSQL, a SELECT read outside any
transaction runs as a prepared statement once its text repeats (`fastpath.pg_prepared`).

They rely on Pony's session cache fields (`immediate`, `db_session`), its per-greenlet `debug`
flag and SQLite's `local_exceptions`; a database with the fast path off keeps Pony's calls.
"""

from __future__ import annotations

import functools
from typing import Any

from pony.orm import core
from pony.orm.dbapiprovider import wrap_dbapi_exceptions

from socketify.db.fastpath.pg_prepared import prepared_query
from socketify.db.pool import BoundedPool

__all__ = [
    "FastPooled",
    "FastPostgres",
    "FastSQLite",
    "fast_provider_class",
    "raise_translated",
]


class FastPooled:
    """Mixin for a pooled provider: `release` and `execute` without Pony's decorator."""

    # True when a session that has not written reads in autocommit mode and `prepare_read`
    # is all Pony's `set_transaction_mode` does for it (SQLite, PostgreSQL; not MySQL, whose
    # sessions Pony marks immediate on connecting).
    session_reads_in_autocommit = False

    def release(self, connection: Any, cache: Any = None) -> None:
        """Return a connection at the end of a session; DDL sessions take Pony's path."""
        session = cache.db_session if cache is not None else None
        if session is not None and session.ddl:
            super().release(connection, cache)  # type: ignore[misc]
        else:
            pool: BoundedPool = self.pool  # type: ignore[attr-defined]
            pool.release(connection)

    def execute(
        self, cursor: Any, sql: str, arguments: Any = None, returning_id: bool = False
    ) -> Any:
        """Run one statement; a driver error is translated exactly as Pony's decorator would.

        The common case (one statement, no new id wanted) runs inline; `executemany` and
        `returning_id` take Pony's own path, which differs by dialect.
        """
        if returning_id or type(arguments) is list:
            return super().execute(cursor, sql, arguments, returning_id)  # type: ignore[misc]
        # SQLite keeps the traceback of an error raised inside a Python SQL function only
        # while a statement runs under Pony's decorator (its `local_exceptions` flag); do the
        # same here.
        flags = getattr(self, "local_exceptions", None)
        try:
            if flags is not None:
                flags.keep_traceback = True
            try:
                if arguments is None:
                    cursor.execute(sql)
                else:
                    cursor.execute(sql, arguments)
            finally:
                if flags is not None:
                    flags.keep_traceback = False
        except Exception as error:
            raise_translated(self, error)
        return None

    def execute_plain(self, cursor: Any, sql: str, arguments: Any) -> None:
        """`execute` for one statement that calls no Python SQL function (a primary-key
        SELECT): without SQLite's traceback bookkeeping, errors translated the same way."""
        try:
            cursor.execute(sql, arguments)
        except Exception as error:
            raise_translated(self, error)

    def prepare_read(self, connection: Any) -> None:
        """Make a pooled connection ready for a read outside any transaction, as Pony's
        `set_transaction_mode` would for a session that has not written; dialects add theirs.

        SQLite connections are in autocommit mode already; MySQL reads in the driver's
        implicit transaction, which the pool's reset ends."""


class FastSQLite(FastPooled):
    """SQLite: a session that has not written costs nothing in `set_transaction_mode`."""

    session_reads_in_autocommit = True

    def set_transaction_mode(self, connection: Any, cache: Any) -> None:
        """Pony's, except that a session which has not written yet costs nothing here.

        PERF: such a session reads in autocommit mode, for which Pony's version only opens a
        cursor it never uses (behind its exception-translating decorator), on every session.
        """
        if cache.immediate or core.local.debug:
            super().set_transaction_mode(connection, cache)  # type: ignore[misc]


class FastPostgres(FastPooled):
    """PostgreSQL: reads in autocommit mode set up without Pony's decorator; the primary-key
    SELECT prepared once per connection."""

    session_reads_in_autocommit = True

    def set_transaction_mode(self, connection: Any, cache: Any) -> None:
        """Pony's, skipped when a read-only session finds the connection already in autocommit.

        PERF: that is every read after the first on a pooled connection; Pony's version would
        only run its exception-translating decorator to conclude there is nothing to do.
        """
        session = cache.db_session
        if cache.immediate or not connection.autocommit or (session and session.serializable):
            super().set_transaction_mode(connection, cache)  # type: ignore[misc]

    def execute(
        self, cursor: Any, sql: str, arguments: Any = None, returning_id: bool = False
    ) -> Any:
        """A SELECT read in autocommit mode (an `Entity.select()`, a raw `db.select`) runs as
        a statement prepared on its connection once its text repeats; the rest as text.

        PERF: the server then skips parsing and planning the statement. PostgreSQL's CPU
        time per request of load_tests/tfb's routes drops by about a third (raw `db.get` by
        key 110-127 µs to 80-90 µs, raw fortunes 100-110 to 60-70, `Fortune.select()` 103-137
        to 77-90), ours by a little, on the machine the figures were taken on."""
        if (
            not returning_id
            and (arguments is None or type(arguments) is dict)
            and cursor.connection.autocommit
        ):
            prepared = prepared_query(sql)
            if prepared is not None:
                try:
                    if prepared.run(cursor.connection, cursor, arguments):
                        return None
                except Exception as error:
                    raise_translated(self, error)
        return super().execute(cursor, sql, arguments, returning_id)

    def prepare_read(self, connection: Any) -> None:
        """Autocommit, as Pony's `set_transaction_mode` leaves a session that has not written."""
        if not connection.autocommit:
            connection.autocommit = True

    def prepared_select(self, sql: str, shape: Any) -> Any:
        """The primary-key loader's statement as a prepared statement, when it can be one."""
        from socketify.db.fastpath.pg_prepared import PreparedSelect

        return PreparedSelect.for_statement(sql, shape)


_MIXINS: dict[str, type] = {"sqlite": FastSQLite, "postgres": FastPostgres, "mysql": FastPooled}


@functools.cache
def fast_provider_class(dialect: str, provider: type) -> type:
    """`provider` (a pooled provider class of `dialect`) with the fast calls in front."""
    mixin = _MIXINS[dialect]
    return type(f"{mixin.__name__}Provider", (mixin, provider), {"__module__": __name__})


@wrap_dbapi_exceptions
def raise_translated(provider: Any, error: Exception) -> None:
    """Raise `error` inside Pony's decorator, which turns a driver error into Pony's own."""
    raise error
