"""What every pooled provider shares: Pony's connection recipe and the `get_pool` override.

Each provider subclasses Pony's own and overrides `get_pool` (plus the two hot calls into the
pool): Pony still decides how a connection is opened (SQLite's custom functions and pragmas,
PostgreSQL's client encoding, MySQL's converters). `PonyRecipe` borrows that step from Pony's
pool class, calling it on a private scratch object each time: Pony's pool object is
thread-local, and sharing it between greenlets would let one greenlet's connection overwrite
another's while a connect is in flight. Between sessions a connection is rolled back.

PERF: the calls Pony makes on every query skip its generic exception-translating decorator
(`connect`, `release`, `execute`); a driver error still goes through Pony's translation, so
callers see the same Pony exceptions as before.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pony.orm.dbapiprovider import wrap_dbapi_exceptions

from socketify.db.pool import BoundedPool

__all__ = ["POOL_SIZE", "POOL_TIMEOUT", "PonyRecipe", "Pooled", "raise_translated"]

# Keyword arguments `connect()` passes through Pony's `bind()`; popped before the driver.
POOL_SIZE = "socketify_pool_size"
POOL_TIMEOUT = "socketify_pool_timeout"


class PonyRecipe:
    """Opens connections the way Pony's pool class `pony_pool` does; resets and closes them."""

    # The pool calls `con.rollback()` itself, without this recipe's `reset` (see pool.py),
    # while `reset` is this class's; a subclass that overrides it gets False.
    reset_is_rollback = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.reset_is_rollback = cls.reset is PonyRecipe.reset

    def __init__(self, pony_pool: Any) -> None:
        self._cls = type(pony_pool)
        # The settings Pony's pool was built with; `con` and `pid` are per-connection state.
        self._config = {k: v for k, v in vars(pony_pool).items() if k not in ("con", "pid")}

    def open(self) -> Any:
        """A new connection, set up by Pony's `_connect`, then by `prepare`."""
        scratch = SimpleNamespace(**self._config, con=None, pid=None)
        self._cls._connect(scratch)
        self.prepare(scratch.con)
        return scratch.con

    def prepare(self, con: Any) -> None:
        """Per-connection set-up after Pony's own; dialect recipes add theirs."""

    def reset(self, con: Any) -> None:
        """End whatever transaction the session left open, as SQLAlchemy's pools do.

        PERF: not Pony's PostgreSQL `DISCARD ALL`, a second round trip per request that also
        throws away the server's cached plans. Session-level state made with raw SQL (`SET`,
        temporary tables, `LISTEN`) therefore stays with the pooled connection: use `SET LOCAL`.
        """
        con.rollback()

    def usable(self, con: Any) -> bool:
        """False for a connection the driver already knows is closed."""
        return not getattr(con, "closed", False) and getattr(con, "open", True)

    def close(self, con: Any) -> None:
        """Close the connection."""
        con.close()


class Pooled:
    """Mixin for a Pony provider: `get_pool` returns a `BoundedPool` around Pony's recipe."""

    # True when a session that has not written reads in autocommit mode and `prepare_read`
    # is all Pony's `set_transaction_mode` does for it (SQLite, PostgreSQL; not MySQL, whose
    # sessions Pony marks immediate on connecting).
    session_reads_in_autocommit = False

    def make_recipe(self, pony_pool: Any) -> PonyRecipe:
        """The recipe for this dialect's connections."""
        return PonyRecipe(pony_pool)

    def get_pool(self, *args: Any, **kwargs: Any) -> BoundedPool:
        """Called by Pony's provider constructor with the `bind()` arguments."""
        size = kwargs.pop(POOL_SIZE, 8)
        timeout = kwargs.pop(POOL_TIMEOUT, 5.0)
        pony_pool = super().get_pool(*args, **kwargs)  # type: ignore[misc]
        return BoundedPool(self.make_recipe(pony_pool), size, timeout)

    # PERF: Pony wraps these two in a generic exception-translating decorator that costs
    # more than the pool itself; the pool already turns driver errors into its own.

    def connect(self) -> tuple[Any, bool]:
        """Check a connection out of the pool (once per db_session that queries)."""
        pool: BoundedPool = self.pool  # type: ignore[attr-defined]
        con, is_new = pool.connect()
        if is_new:
            self.welcome(con)
        return con, False

    def welcome(self, con: Any) -> None:
        """Run the `@db.on_connect` hooks on a connection the pool has just opened.

        Here rather than after `connect` returns, as Pony would: a hook that fails there would
        leave the connection checked out forever; here it is dropped."""
        try:
            self.database.call_on_connect(con)  # type: ignore[attr-defined]
        except BaseException:
            self.pool.drop(con)  # type: ignore[attr-defined]
            raise

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
        # while a statement runs under Pony's decorator; do the same here.
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


@wrap_dbapi_exceptions
def raise_translated(provider: Any, error: Exception) -> None:
    """Raise `error` inside Pony's decorator, which turns a driver error into Pony's own."""
    raise error
