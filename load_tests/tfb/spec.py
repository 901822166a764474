"""What the six TechEmpower test types ask of every implementation here, in one place.

Pure standard library: the peers import it from their own virtualenv. The facts follow
TechEmpower's published requirements: a `World` table of 10,000 rows whose `randomNumber` is
1-10,000, the twelve standard `Fortune` rows, the `queries` parameter clamped to 1-500 (a
missing or non-numeric value counts as 1), one extra fortune added at request time, and the
rendered fortunes sorted by message with the HTML escaped.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from urllib.parse import urlsplit

__all__ = [
    "ADDITIONAL_FORTUNE",
    "DEFAULT_SCHEMA",
    "DEFAULT_URL",
    "FORTUNES",
    "FORTUNE_TEMPLATE",
    "HELLO",
    "MAX_QUERIES",
    "MESSAGE",
    "POOL_SIZE",
    "SERVER_NAME",
    "TEMPLATES",
    "URL_ENV",
    "WORLD_ROWS",
    "database_url",
    "pg_settings",
    "queries_count",
    "random_id",
    "random_ids",
    "random_number",
]

URL_ENV = "TFB_DATABASE_URL"
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/test"
# The tables live in this schema unless the URL names one (`?schema=`), so `world` and
# `fortune` never clash with other tables of the same database.
DEFAULT_SCHEMA = "tfb"
# 10,000 as TechEmpower has it; a smaller table (at least 500 rows) keeps tests quick.
WORLD_ROWS = int(os.environ.get("TFB_WORLD_ROWS", "10000"))
MAX_QUERIES = 500
# Connections per worker process, the same for every implementation.
POOL_SIZE = int(os.environ.get("TFB_POOL_SIZE", "8"))
SERVER_NAME = "tfb"  # for peers whose server sends no `Server` header of its own

MESSAGE = "Hello, World!"
HELLO = b"Hello, World!"
ADDITIONAL_FORTUNE = "Additional fortune added at request time."
FORTUNES = (
    (1, "fortune: No such file or directory"),
    (2, "A computer scientist is someone who fixes things that aren't broken."),
    (3, "After enough decimal places, nobody gives a damn."),
    (4, "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1"),
    (5, "A computer program does what you tell it to do, not what you want it to do."),
    (6, "Emacs is a nice operating system, but I prefer UNIX. \u2014 Tom Christaensen"),
    (7, "Any program that runs right is obsolete."),
    (8, "A list is only as strong as its weakest link. \u2014 Donald Knuth"),
    (9, "Feature: A bug with seniority."),
    (10, "Computers make very fast, very accurate mistakes."),
    (11, '<script>alert("This should not be displayed in a browser alert box.");</script>'),
    (12, "\u30d5\u30ec\u30fc\u30e0\u30ef\u30fc\u30af\u306e\u30d9\u30f3\u30c1\u30de\u30fc\u30af"),
)
# Jinja2 syntax, autoescaped: the one template every implementation renders.
# The fortunes page, one Jinja2 template (Django's engine reads it too): ours renders the file
# with `res.render`, the peers render its text.
TEMPLATES = Path(__file__).parent / "templates"
FORTUNE_TEMPLATE = (TEMPLATES / "fortunes.html").read_text()


def queries_count(value: str | None) -> int:
    """The `queries` parameter: 1 when missing or not a number, else clamped to 1-500."""
    try:
        count = int(value or "")
    except ValueError:
        return 1
    return min(max(count, 1), MAX_QUERIES)


def random_id() -> int:
    """A `World` id, 1-10,000."""
    return random.randint(1, WORLD_ROWS)


def random_number() -> int:
    """A new `randomNumber`, 1-10,000."""
    return random.randint(1, 10_000)


def random_ids(count: int) -> list[int]:
    """`count` distinct `World` ids in ascending order: one query per row, and concurrent
    updates lock their rows in the same order, so they never deadlock."""
    return sorted(random.sample(range(1, WORLD_ROWS + 1), count))


def database_url() -> tuple[str, str]:
    """`(url without ?schema=, schema)` from $TFB_DATABASE_URL."""
    url = os.environ.get(URL_ENV) or DEFAULT_URL
    base, _, query = url.partition("?")
    params = dict(part.split("=", 1) for part in query.split("&") if "=" in part)
    schema = params.pop("schema", DEFAULT_SCHEMA)
    rest = "&".join(f"{key}={value}" for key, value in params.items())
    return (f"{base}?{rest}" if rest else base), schema


def pg_settings() -> dict[str, object]:
    """Host, port, user, password and database name of $TFB_DATABASE_URL, for drivers that
    take keywords (asyncpg, Django)."""
    parts = urlsplit(database_url()[0])
    return {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 5432,
        "user": parts.username or "postgres",
        "password": parts.password or "",
        "database": parts.path.lstrip("/") or "postgres",
    }
