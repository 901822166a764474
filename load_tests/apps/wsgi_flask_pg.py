"""The Flask + PostgreSQL app of the WSGI benchmark: GET /db reads one random row of
TechEmpower's `world` table through a psycopg2 pool and answers it as JSON.

Every contender imports it unchanged. The pool is psycopg2's own `ThreadedConnectionPool`,
made on the first request (after any fork and monkey-patching) with its connections in
autocommit (a single SELECT needs no transaction), and a semaphore in front so
a request waits for a free connection instead of failing: a thread waits under Granian, a
greenlet under gevent. The database is $TFB_DATABASE_URL (load_tests/tfb/spec.py), the table
made by `load_tests.tfb.schema.seed`; POOL_SIZE connections per worker.
"""

from __future__ import annotations

import os
import random
import threading
from typing import Any

from flask import Flask
from psycopg2.pool import ThreadedConnectionPool

from load_tests.tfb.spec import WORLD_ROWS, database_url

POOL_SIZE = int(os.environ.get("BENCH_PG_POOL", "16"))

app = Flask(__name__)


class _Pool:
    """psycopg2's pool, made on first use, and a semaphore that waits for a connection."""

    def __init__(self) -> None:
        self.made = threading.Lock()
        self.pool: ThreadedConnectionPool | None = None
        self.free = threading.BoundedSemaphore(POOL_SIZE)

    def one_row(self, sql: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        with self.free:
            pool = self.pool or self._make()
            con = pool.getconn()
            try:
                with con.cursor() as cursor:
                    cursor.execute(sql, args)
                    row = cursor.fetchone()
            finally:
                pool.putconn(con)
        return row

    def _make(self) -> ThreadedConnectionPool:
        with self.made:
            if self.pool is None:
                url, schema = database_url()
                # As many kept as made: psycopg2's pool closes what it gets back beyond
                # `minconn`, which would mean a new connection for most requests.
                self.pool = ThreadedConnectionPool(
                    POOL_SIZE, POOL_SIZE, url, options=f"-c search_path={schema}"
                )
                # One SELECT needs no transaction: no BEGIN and ROLLBACK round trips.
                connections = [self.pool.getconn() for _ in range(POOL_SIZE)]
                for con in connections:
                    con.autocommit = True
                    self.pool.putconn(con)
            return self.pool


pool = _Pool()


@app.get("/db")
def db() -> dict[str, int]:
    """One world by a random id: {"id": ..., "randomNumber": ...}."""
    world_id, number = pool.one_row(
        "SELECT id, randomnumber FROM world WHERE id = %s", (random.randint(1, WORLD_ROWS),)
    )
    return {"id": world_id, "randomNumber": number}
