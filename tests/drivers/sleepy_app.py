"""A WSGI app whose routes each wait one second in a database or Redis, through the driver
the way an app would use it, beside a /ping that must keep answering meanwhile.

Connections are made per request, as an unpooled app would: the test is about waiting, not
pooling. The servers are the machine's (see tests/support/services.py).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable
from typing import Any

# Imported with the module, as apps do: under --preload that is before the worker patches.
import django
import psycopg
import psycopg2
import pymysql
import redis
import sqlalchemy
from django.conf import settings

PG_DSN = os.environ.get("SLEEPY_PG", "postgresql://postgres@127.0.0.1:5432/test")
MYSQL = {"host": "127.0.0.1", "port": 3306, "user": "root", "database": "test"}
REDIS = ("127.0.0.1", 6379)
SECONDS = 1


def with_psycopg2() -> None:
    with psycopg2.connect(PG_DSN) as con, con.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(%s)", (SECONDS,))
    con.close()


def with_psycopg3() -> None:
    with psycopg.connect(PG_DSN) as con:
        con.execute("SELECT pg_sleep(%s)", (SECONDS,))


def with_sqlalchemy() -> None:
    engine = _engine()
    with engine.connect() as con:
        con.execute(sqlalchemy.text("SELECT pg_sleep(:s)"), {"s": SECONDS})


_engines: list[Any] = []


def _engine() -> Any:
    if not _engines:
        url = PG_DSN.replace("postgresql://", "postgresql+psycopg2://", 1)
        _engines.append(sqlalchemy.create_engine(url, pool_size=4))
    return _engines[0]


def with_django() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(%s)", [SECONDS])
    connection.close()


def with_pymysql() -> None:
    con = pymysql.connect(**MYSQL)
    try:
        with con.cursor() as cursor:
            cursor.execute("SELECT SLEEP(%s)", (SECONDS,))
    finally:
        con.close()


def with_redis() -> None:
    client = redis.Redis(*REDIS)
    try:
        client.blpop([f"sleepy-{uuid.uuid4().hex}"], timeout=SECONDS)  # nothing ever comes
    finally:
        client.close()


def _configure_django() -> None:
    url = PG_DSN.split("://", 1)[1]
    user, _, rest = url.partition("@")
    hostport, _, name = rest.partition("/")
    host, _, port = hostport.partition(":")
    settings.configure(
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": name,
                "USER": user,
                "HOST": host,
                "PORT": port,
            }
        },
        INSTALLED_APPS=[],
        USE_TZ=True,
    )
    django.setup()


ROUTES: dict[str, Callable[[], None]] = {
    "/psycopg2": with_psycopg2,
    "/psycopg3": with_psycopg3,
    "/sqlalchemy": with_sqlalchemy,
    "/django": with_django,
    "/pymysql": with_pymysql,
    "/redis": with_redis,
}

_configure_django()


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """/ping answers at once; every other route waits in its driver first."""
    path = environ["PATH_INFO"]
    wait = ROUTES.get(path)
    if wait is None and path != "/ping":
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found\n"]
    if wait is not None:
        wait()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"done\n" if wait is not None else b"pong\n"]
