"""PostgreSQL (psycopg2): Pony's provider on a bounded pool, a schema per URL, gevent waits."""

from __future__ import annotations

import sys
from typing import Any

from pony.orm.dbproviders.postgres import PGProvider

from socketify.db.pool import BoundedPool
from socketify.db.providers.base import PonyRecipe, Pooled

__all__ = ["SCHEMA", "PostgresRecipe", "Provider", "cooperate_with_gevent"]

SCHEMA = "socketify_schema"


class PostgresRecipe(PonyRecipe):
    """psycopg2 connections, made cooperative when the process runs under gevent."""

    def prepare(self, con: Any) -> None:
        cooperate_with_gevent()


class Provider(Pooled, PGProvider):
    """Pony's PostgreSQL provider with a bounded pool and, optionally, a schema of its own."""

    def get_pool(self, *args: Any, **kwargs: Any) -> BoundedPool:
        """A bounded pool; with `schema=` every connection searches that schema first."""
        schema = kwargs.pop(SCHEMA, None)
        if schema is not None:
            # Unqualified names resolve in the schema, and Pony looks tables up there too.
            self.default_schema_name = schema
            option = f"-c search_path={schema}"
            kwargs["options"] = f"{kwargs['options']} {option}" if "options" in kwargs else option
        return super().get_pool(*args, **kwargs)

    def make_recipe(self, pony_pool: Any) -> PonyRecipe:
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


def cooperate_with_gevent() -> None:
    """Under gevent, make psycopg2 wait for the server by parking the greenlet, not the hub.

    psycopg2 talks to the server from C (libpq), out of monkey-patching's reach; with a wait
    callback installed it runs each query asynchronously and asks us to wait for readiness.
    """
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None or not monkey.is_module_patched("socket"):
        return
    import psycopg2.extensions as extensions

    if extensions.get_wait_callback() is not None:
        return
    from gevent.socket import wait_read, wait_write

    ok, read, write = extensions.POLL_OK, extensions.POLL_READ, extensions.POLL_WRITE

    def wait(con: Any, timeout: float | None = None) -> None:
        while True:
            state = con.poll()
            if state == ok:
                return
            if state == read:
                wait_read(con.fileno(), timeout=timeout)
            elif state == write:
                wait_write(con.fileno(), timeout=timeout)
            else:
                raise extensions.OperationalError(f"unexpected psycopg2 poll state {state}")

    extensions.set_wait_callback(wait)
