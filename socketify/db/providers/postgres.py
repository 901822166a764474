"""PostgreSQL (psycopg2): Pony's provider on a bounded pool, a schema per URL, gevent waits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pony.orm.dbproviders.postgres import PGProvider

from socketify.db.pool import BoundedPool
from socketify.db.providers.base import PonyRecipe, Pooled
from socketify.db.providers.pg_green import GreenConnection
from socketify.drivers import cooperate_with_gevent

__all__ = ["SCHEMA", "PostgresRecipe", "Provider"]

SCHEMA = "socketify_schema"


class PostgresRecipe(PonyRecipe):
    """psycopg2 connections, made cooperative when the process runs under gevent."""

    usable_unless_closed = True  # `usable` below: the pool reads `con.closed` itself

    def prepare(self, con: Any) -> None:
        cooperate_with_gevent()

    def usable(self, con: Any) -> bool:
        """psycopg2's own flag (the generic check would look `open` up and fail each time)."""
        return not con.closed

    def close(self, con: Any) -> None:
        """Close the connection and the cursor it kept."""
        if isinstance(con, GreenConnection):
            con.key_read_cursor = None
        con.close()


class Provider(Pooled, PGProvider):
    """Pony's PostgreSQL provider with a bounded pool and, optionally, a schema of its own."""

    # Connections of this type keep a cursor for the fast path's primary-key reads.
    key_read_cursor_type = GreenConnection

    def get_pool(self, *args: Any, **kwargs: Any) -> BoundedPool:
        """A bounded pool; with `schema=` every connection searches that schema first."""
        schema = kwargs.pop(SCHEMA, None)
        if schema is not None:
            # Unqualified names resolve in the schema, and Pony looks tables up there too.
            self.default_schema_name = schema
            option = f"-c search_path={schema}"
            kwargs["options"] = f"{kwargs['options']} {option}" if "options" in kwargs else option
        kwargs.setdefault("connection_factory", GreenConnection)
        return super().get_pool(*args, **kwargs)

    def make_recipe(self, pony_pool: Callable[[], Any]) -> PonyRecipe:
        """PostgreSQL's recipe."""
        return PostgresRecipe(pony_pool)

    def adopt_gevent(self) -> None:
        """The process was monkey-patched after connecting: make psycopg2 cooperative now."""
        cooperate_with_gevent()

    def inspect_connection(self, connection: Any) -> None:
        """Pony's inspection, then create the URL's schema if it is missing."""
        super().inspect_connection(connection)
        if self.default_schema_name != "public":
            cursor = connection.cursor()
            cursor.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.default_schema_name}"')
            connection.commit()
