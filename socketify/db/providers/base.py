"""What every pooled provider shares: Pony's connection recipe and the `get_pool` override.

Each provider subclasses Pony's own and overrides `get_pool` and `connect`: Pony still decides
how a connection is opened (SQLite's custom functions and pragmas, PostgreSQL's client
encoding, MySQL's converters), and its pool's `release`, `drop` and `disconnect` calls land on
the `BoundedPool`. `PonyRecipe` borrows the opening from Pony's pool class: for each new
connection it asks the provider's Pony `get_pool` for a Pony pool object of the database's
settings and connects that (`connect()`, Pony's public pool call), then keeps the connection
and drops the Pony pool. Pony's pool object is thread-local and holds one connection, so one
made per connection lets greenlets connect at once without one's connection overwriting
another's. Between sessions a connection is rolled back.

A database with the fast path on puts the calls of socketify.db.fastpath.providers in front.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from socketify.db.pool import BoundedPool

__all__ = ["POOL_SIZE", "POOL_TIMEOUT", "PonyRecipe", "Pooled"]

# Keyword arguments `connect()` passes through Pony's `bind()`; popped before the driver.
POOL_SIZE = "socketify_pool_size"
POOL_TIMEOUT = "socketify_pool_timeout"


class PonyRecipe:
    """Opens connections the way Pony's pool class does; resets and closes them."""

    # The pool calls `con.rollback()` itself, without this recipe's `reset` (see pool.py),
    # while `reset` is this class's; a subclass that overrides it gets False.
    reset_is_rollback = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.reset_is_rollback = cls.reset is PonyRecipe.reset

    def __init__(self, pony_pool: Callable[[], Any]) -> None:
        # Makes a new Pony pool object of the database's settings (the provider's `get_pool`).
        self.pony_pool = pony_pool

    def open(self) -> Any:
        """A new connection, opened by a Pony pool of its own, then set up by `prepare`."""
        con, _ = self.pony_pool().connect()
        self.prepare(con)
        return con

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

    def make_recipe(self, pony_pool: Callable[[], Any]) -> PonyRecipe:
        """The recipe for this dialect's connections; `pony_pool()` makes a Pony pool."""
        return PonyRecipe(pony_pool)

    def get_pool(self, *args: Any, **kwargs: Any) -> BoundedPool:
        """Called by Pony's provider constructor with the `bind()` arguments."""
        size = kwargs.pop(POOL_SIZE, 8)
        timeout = kwargs.pop(POOL_TIMEOUT, 5.0)
        pony_pool = functools.partial(super().get_pool, *args, **kwargs)  # type: ignore[misc]
        return BoundedPool(self.make_recipe(pony_pool), size, timeout)

    def connect(self) -> tuple[Any, bool]:
        """Check a connection out of the pool (once per db_session that queries).

        PERF: without Pony's exception-translating decorator, which costs more than the pool
        itself; the pool already turns driver errors into its own."""
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
