"""Create and seed TechEmpower's `world` and `fortune` tables (`python -m load_tests.tfb setup`).

The tables go in the schema of $TFB_DATABASE_URL (`tfb` unless the URL says `?schema=`), are
dropped and made anew, and get `WORLD_ROWS` worlds with a random `randomNumber` in 1-10,000
and the twelve standard fortunes. `worlds` reads the whole `world` table back, for the
verifier's check that updates persisted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from load_tests.tfb.spec import FORTUNES, WORLD_ROWS, database_url

__all__ = ["connection", "drop", "seed", "worlds"]


@contextmanager
def connection() -> Iterator[Any]:
    """A psycopg2 connection to $TFB_DATABASE_URL searching its schema, closed afterwards."""
    import psycopg2

    url, schema = database_url()
    con = psycopg2.connect(url, options=f"-c search_path={schema}")
    try:
        yield con
    finally:
        con.close()


def seed(world_rows: int = WORLD_ROWS) -> str:
    """Make the schema and its two tables anew with their rows; returns the schema's name."""
    _, schema = database_url()
    with connection() as con, con.cursor() as cursor:
        cursor.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        cursor.execute("DROP TABLE IF EXISTS world, fortune")
        cursor.execute(
            "CREATE TABLE world (id integer PRIMARY KEY, randomnumber integer NOT NULL DEFAULT 0)"
        )
        cursor.execute(
            "INSERT INTO world (id, randomnumber) SELECT x, 1 + floor(random() * 10000)::int"
            " FROM generate_series(1, %s) AS x",
            (world_rows,),
        )
        cursor.execute(
            "CREATE TABLE fortune (id integer PRIMARY KEY, message varchar(2048) NOT NULL)"
        )
        cursor.executemany("INSERT INTO fortune (id, message) VALUES (%s, %s)", FORTUNES)
        con.commit()
    return schema


def drop() -> None:
    """Drop the schema of $TFB_DATABASE_URL with everything in it."""
    _, schema = database_url()
    with connection() as con, con.cursor() as cursor:
        cursor.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        con.commit()


def worlds() -> dict[int, int]:
    """Every world's `randomNumber` by id, as the database has them now."""
    with connection() as con, con.cursor() as cursor:
        cursor.execute("SELECT id, randomnumber FROM world")
        return dict(cursor.fetchall())
