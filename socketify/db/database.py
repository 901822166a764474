"""`connect(url)`: a Pony `Database` bound to SQLite, PostgreSQL or MySQL through a bounded pool.

Binding opens one connection to learn the server's version, and `generate_mapping` may open
another; both go back to the pool, and the pool's idle connections are closed before the
process forks, so a preloading master hands no connection to its workers. Each worker then
connects lazily, on its first query.

`fast_path` (on unless `False` or `SOCKETIFY_DB_FAST_PATH=0`, and only on a verified Pony
release) decides whether the database's entities, attributes and provider take the calls of
socketify.db.fastpath or stay Pony's own; `db.fast_path` says which it got.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import pony.orm

import socketify.db.fastpath as fastpath
import socketify.db.green as green
from socketify.db.pipeline import PipelineReads, pipeline_refusal
from socketify.db.pool import BoundedPool, PoolStats
from socketify.db.providers import provider_class
from socketify.db.providers.base import POOL_SIZE, POOL_TIMEOUT
from socketify.db.rows import ROW_READERS
from socketify.db.statements import Statement
from socketify.db.urls import DatabaseURL, parse_url

__all__ = ["DEFAULT_URL", "MIGRATING_ENV", "Database", "connect"]

log = logging.getLogger("socketify.db")

DEFAULT_URL = "sqlite:///app.db"
_UNDECIDED = object()  # `pipeline_reads` not asked yet in this database
# Set by `socketify db ...` while it imports the app: the schema is the migrations' business,
# so `generate_mapping` neither checks nor creates tables then.
MIGRATING_ENV = "SOCKETIFY_DB_MIGRATING"


class Database(pony.orm.Database):
    """A Pony `Database` (declare entities on `db.Entity`) with a bounded connection pool."""

    url: DatabaseURL
    _dblocal: Any  # Pony's per-thread `DbLocal` (see `use_local_class`)

    def __init__(self, *args: Any, fast_path: bool = True, **kwargs: Any) -> None:
        # Whether this database takes the fast path (socketify.db.fastpath): asked for, and
        # neither switched off by SOCKETIFY_DB_FAST_PATH nor refused for the installed Pony.
        self.fast_path = fastpath.resolve(fast_path)
        super().__init__(*args, **kwargs)
        if self.fast_path:
            from socketify.db.fastpath.loader import entity_base
            from socketify.db.fastpath.rows import read_row

            # Pony's `Entity` base on a metaclass whose `Entity[pk]` reads in a few calls;
            # entities declared on `db.Entity` inherit it, and `get_row` reads them directly.
            self.Entity = entity_base(self)
            ROW_READERS[type(self.Entity)] = read_row

    @property
    def pool(self) -> BoundedPool:
        """This database's connection pool (one per process)."""
        provider = self.provider
        if provider is None:
            raise RuntimeError("the database is not bound")
        pool: BoundedPool = provider.pool
        return pool

    def pool_stats(self) -> PoolStats:
        """A snapshot of this process's pool: in use, idle, waiting, peak, timeouts."""
        return self.pool.stats()

    @property
    def dialect(self) -> str:
        """ "sqlite", "postgres" or "mysql"."""
        return self.url.dialect

    def generate_mapping(
        self, filename: Any = None, check_tables: bool = True, create_tables: bool = False
    ) -> Any:
        """Pony's `generate_mapping`, then, on the fast path, loaded attribute values read in
        one call; while `socketify db` runs, tables are left to migrations."""
        if os.environ.get(MIGRATING_ENV) == "1":
            check_tables = create_tables = False
        result = super().generate_mapping(
            filename, check_tables=check_tables, create_tables=create_tables
        )
        if self.fast_path:
            from socketify.db.fastpath.attributes import speed_up_reads

            for entity in self.entities.values():
                speed_up_reads(entity)
        return result

    def statement(self, sql: str) -> Statement:
        """A raw statement with `$1`, `$2`... parameters, prepared once per connection on
        PostgreSQL; its rows are tuples (see socketify.db.statements)."""
        return Statement(self, sql)

    def pipeline_reads(self) -> PipelineReads | None:
        """This process's psycopg 3 pool for pipelined reads (PostgreSQL); None where they
        cannot run: another dialect, psycopg 3 missing or not cooperative (logged once)."""
        reads = self.__dict__.get("_pipeline_reads", _UNDECIDED)
        if reads is _UNDECIDED:
            reads = None
            if self.url.dialect == "postgres":
                reason = pipeline_refusal()
                if reason is None:
                    reads = PipelineReads(self.url.params, self.url.schema, self.pool)
                else:
                    log.warning("pipelined reads off, one round trip per read: %s", reason)
            self._pipeline_reads = reads
        return reads

    def close_idle_connections(self) -> None:
        """Close this process's idle connections, of every pool the database keeps."""
        self.pool.close_idle()
        reads = self.__dict__.get("_pipeline_reads")
        if isinstance(reads, PipelineReads):
            reads.close_idle()

    def disconnect(self) -> None:
        """Pony's `disconnect`, and the idle connections of the pipelined reads' pool."""
        super().disconnect()
        reads = self.__dict__.get("_pipeline_reads")
        if isinstance(reads, PipelineReads):
            reads.close_idle()

    def use_local_class(self, local_cls: type) -> None:
        """Keep this database's per-thread query statistics (`last_sql`, `local_stats`) on
        `local_cls` storage: gevent's greenlet-local class, once the process is patched."""
        self._dblocal = green.rebased(self._dblocal, local_cls)

    def __repr__(self) -> str:
        url = getattr(self, "url", None)
        return f"<socketify.db.Database {url.redacted() if url else 'unbound'}>"


def connect(
    url: str | None = None,
    *,
    pool_size: int = 8,
    pool_timeout: float = 5.0,
    fast_path: bool = True,
) -> Database:
    """Bind a new `Database` to `url` (default: $DATABASE_URL, else sqlite:///app.db).

    Each worker process holds at most `pool_size` connections; a request that finds them all
    busy waits up to `pool_timeout` seconds, then gets a 503. `fast_path=False` keeps the
    database on Pony's own code (see socketify.db.fastpath).
    """
    parsed = parse_url(url or os.environ.get("DATABASE_URL") or DEFAULT_URL)
    if pool_size < 1:
        raise ValueError("pool_size must be at least 1")
    if pool_timeout < 0:
        raise ValueError("pool_timeout must not be negative")
    provider = provider_class(parsed.dialect)
    options: dict[str, Any] = dict(parsed.params)
    options[POOL_SIZE] = pool_size
    options[POOL_TIMEOUT] = pool_timeout
    if parsed.dialect == "sqlite":
        options.setdefault("filename", ":sharedmemory:" if parsed.memory else None)
        options["create_db"] = True
    elif parsed.schema is not None:
        from socketify.db.providers.postgres import SCHEMA

        options[SCHEMA] = parsed.schema
    db = Database(fast_path=fast_path)
    if db.fast_path:
        from socketify.db.fastpath.providers import fast_provider_class

        provider = fast_provider_class(parsed.dialect, provider)
    db.url = parsed
    db.bind(provider, **options)
    # Pony records the name only when bound by name; `@db.on_connect(provider="sqlite")`
    # hooks match against it.
    db.provider_name = parsed.dialect
    green.track(db)
    return db
