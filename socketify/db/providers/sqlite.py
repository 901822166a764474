"""SQLite: Pony's provider on a bounded pool; WAL for files; memory databases kept alive."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pony.orm.dbproviders.sqlite import SQLiteProvider

from socketify.db.pool import BoundedPool
from socketify.db.providers.base import PonyRecipe, Pooled

__all__ = ["Provider", "SQLiteRecipe"]


class SQLiteRecipe(PonyRecipe):
    """SQLite connections: WAL journal for files (readers never wait for the writer)."""

    # A sqlite3 connection has neither `closed` nor `open`: `usable` would always say True.
    check_usable = False

    def __init__(self, pony_pool: Callable[[], Any], memory: bool) -> None:
        super().__init__(pony_pool)
        self.memory = memory
        self._anchor: Any = None

    def open(self) -> Any:
        """A new connection; an in-memory database also gets one that is never closed."""
        if self.memory and self._anchor is None:
            # A shared-cache memory database lives only while a connection to it is open.
            self._anchor = super().open()
        return super().open()

    def prepare(self, con: Any) -> None:
        # Pony already turns foreign keys on; the busy timeout comes from `timeout=`.
        if not self.memory:
            con.execute("PRAGMA journal_mode = WAL")
            con.execute("PRAGMA synchronous = NORMAL")  # WAL keeps this safe across crashes


class Provider(Pooled, SQLiteProvider):
    """Pony's SQLite provider with a bounded pool."""

    def make_recipe(self, pony_pool: Callable[[], Any]) -> PonyRecipe:
        """SQLite's recipe; knows whether the database lives in memory."""
        settings = pony_pool()  # Pony's pool object, not connected: its settings
        memory = bool(settings.is_shared_memory_db or settings.filename == ":memory:")
        return SQLiteRecipe(pony_pool, memory)

    def get_pool(self, *args: Any, **kwargs: Any) -> BoundedPool:
        """A bounded pool; a single connection for an in-memory database."""
        pool = super().get_pool(*args, **kwargs)
        if isinstance(pool.recipe, SQLiteRecipe) and pool.recipe.memory:
            # Shared-cache connections lock whole tables against each other; take turns.
            pool.size = 1
        return pool

    def adopt_gevent(self) -> None:
        """Rebuild Pony's writer locks from the current `threading` (after monkey-patching)."""
        self.pre_transaction_lock = threading.Lock()
        self.transaction_lock = threading.Lock()
