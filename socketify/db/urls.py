"""Database URLs: `sqlite:///app.db`, `postgres://user:pw@host:5432/db`, `mysql://...`.

SQLite paths follow the common URL convention: `sqlite:///app.db` is relative to the working
directory, `sqlite:////var/lib/app.db` is absolute, and `sqlite://` or `sqlite:///:memory:`
is a private in-memory database. Query parameters of PostgreSQL and MySQL URLs go to the driver
(`?sslmode=require`, `?charset=utf8mb4`), except `schema=NAME` on PostgreSQL, which puts the
tables of this database in that schema.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = ["DatabaseURL", "parse_url"]

_DIALECTS = {
    "sqlite": "sqlite",
    "postgres": "postgres",
    "postgresql": "postgres",
    "postgresql+psycopg2": "postgres",
    "mysql": "mysql",
    "mysql+pymysql": "mysql",
    "mariadb": "mysql",
}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


@dataclass(frozen=True)
class DatabaseURL:
    """A parsed database URL: the dialect and the keyword arguments for its driver."""

    dialect: str  # "sqlite", "postgres" or "mysql"
    params: dict[str, Any] = field(default_factory=dict)
    schema: str | None = None  # PostgreSQL only
    memory: bool = False  # SQLite only
    text: str = ""

    def redacted(self) -> str:
        """The URL with its password masked, for logs and messages."""
        return re.sub(r"(//[^:/@]*:)[^@]*@", r"\1***@", self.text)


def parse_url(url: str) -> DatabaseURL:
    """Parse a database URL; ValueError names what is wrong with it."""
    scheme, sep, _ = url.partition("://")
    dialect = _DIALECTS.get(scheme.lower())
    if not sep or dialect is None:
        known = ", ".join(sorted({f"{name}://" for name in _DIALECTS}))
        raise ValueError(f"unsupported database URL {url!r}: expected one of {known}")
    if dialect == "sqlite":
        return _sqlite(url)
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    params: dict[str, Any] = {}
    if parts.hostname:
        params["host"] = parts.hostname
    if parts.port:
        params["port"] = parts.port
    if parts.username:
        params["user"] = unquote(parts.username)
    if parts.password is not None:
        params["password"] = unquote(parts.password)
    name = unquote(parts.path.lstrip("/"))
    schema = None
    if dialect == "postgres":
        if name:
            params["dbname"] = name
        schema = query.pop("schema", None)
        if schema is not None and not _IDENTIFIER.fullmatch(schema):
            raise ValueError(f"invalid schema name {schema!r} in the database URL")
        params.update(query)
    else:
        if name:
            params["database"] = name
        # pymysql wants numbers for its timeouts and flags.
        params.update({k: int(v) if v.isdigit() else v for k, v in query.items()})
    return DatabaseURL(dialect, params, schema=schema, text=url)


def _sqlite(url: str) -> DatabaseURL:
    rest = url.split("://", 1)[1]
    path, _, query_text = rest.partition("?")
    query = dict(parse_qsl(query_text, keep_blank_values=True))
    timeout = float(query.pop("timeout", "5"))
    if query:
        raise ValueError(f"unknown SQLite URL parameters: {', '.join(sorted(query))}")
    if path in ("", "/", "/:memory:"):
        return DatabaseURL("sqlite", {"timeout": timeout}, memory=True, text=url)
    if not path.startswith("/"):
        raise ValueError(f"SQLite URLs are sqlite:///relative.db or sqlite:////abs.db: {url!r}")
    filename = unquote(path[1:])  # one slash belongs to the URL syntax
    return DatabaseURL(
        "sqlite", {"filename": os.path.abspath(filename), "timeout": timeout}, text=url
    )
