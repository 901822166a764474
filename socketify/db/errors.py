"""Which database errors are the client's business, and the HTTP answer for each.

    ObjectNotFound (Entity[pk] missing)                     404 {"error": "not found"}
    attribute validation (Pony's ValueError/TypeError,
      ConstraintError: required, max_len, min/max, py_check) 422 {"error": "validation failed",
                                                                 "errors": {field: [message]}}
    unique violation (in the session cache or the database) 409 {"error": "already exists"}
    other integrity violation (foreign key, check)          409 {"error": "constraint violated"}
    optimistic check failed (a concurrent update)           409 {"error": "modified concurrently"}
    pool timeout, database unreachable, connection lost     503 + Retry-After
      (killed, server restarting, network gone)

A ValueError raised by the application's own code is not a validation error and stays a 500:
only exceptions raised inside Pony count, recognised by where they were raised.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from pony.orm import core as orm

from socketify.db.pool import DatabaseUnavailable

__all__ = [
    "ErrorAnswer",
    "answer_for",
    "connection_lost",
    "integrity_error",
    "is_unique_violation",
    "send_answer",
]

log = logging.getLogger("socketify.db")

# "Attribute User.name is required", "Value 200 of attr User.age is greater than ...",
# "Attribute User[1].name is required", "Check for attribute User.nick failed"
_ATTRIBUTE = re.compile(r"\battr(?:ibute)? (\w+)(?:\[[^\]]*\])?\.(\w+)", re.IGNORECASE)
_UNKNOWN_ATTRIBUTE = re.compile(r"Unknown attribute '(\w+)'")
_CACHE_KEY = re.compile(r"for key (\w+)")
# PostgreSQL: Key (email)=(a@b) already exists.   SQLite: UNIQUE constraint failed: User.email
# MariaDB: ... for key 'email'   MySQL 8: ... for key 'user.email'   composite: 'unq_user__a_b'
_UNIQUE_FIELD = re.compile(
    r"Key \((\w+)\)=|UNIQUE constraint failed: \w+\.(\w+)|for key '(?:\w+\.)?(?!PRIMARY')(\w+)'"
)


@dataclass(frozen=True)
class ErrorAnswer:
    """The status, JSON body and headers that answer a database error."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def answer_for(exc: BaseException) -> ErrorAnswer | None:
    """The HTTP answer for `exc`, or None when it is a server-side bug (a 500)."""
    if isinstance(exc, DatabaseUnavailable):
        return ErrorAnswer(503, {"error": exc.message or "database unavailable"}, exc.headers)
    if connection_lost(exc):
        return ErrorAnswer(503, {"error": "database unavailable"}, {"Retry-After": "1"})
    if isinstance(exc, orm.ObjectNotFound):
        return ErrorAnswer(404, {"error": "not found"})
    if isinstance(exc, orm.CacheIndexError):
        return _conflict("already exists", _CACHE_KEY.search(str(exc)))
    if isinstance(exc, orm.OptimisticCheckError | orm.UnrepeatableReadError):
        return ErrorAnswer(409, {"error": "modified concurrently; retry"})
    duplicate = _duplicate_key(exc)
    if duplicate is not None:
        return duplicate
    integrity = integrity_error(exc)
    if integrity is not None:
        if is_unique_violation(integrity):
            return _conflict("already exists", _UNIQUE_FIELD.search(str(integrity)))
        return ErrorAnswer(409, {"error": "constraint violated"})
    if isinstance(exc, orm.TransactionIntegrityError):  # Pony's own unique-index check
        return _conflict("already exists", None)
    if isinstance(exc, orm.ConstraintError) or (
        isinstance(exc, ValueError | TypeError) and _raised_inside_pony(exc)
    ):
        return _validation(exc)
    return None


def send_answer(res: Any, answer: ErrorAnswer, exc: BaseException) -> None:
    """Answer `res` with `answer` (the headers set before the error are kept), logging `exc`
    as a warning when the answer is a 5xx."""
    if answer.status >= 500:
        log.warning("database error answered %d: %s", answer.status, exc)
    else:
        log.debug("database error answered %d: %s", answer.status, exc)
    res.reset_for_error()
    for name, value in answer.headers.items():
        res.set_header(name, value)
    res.status(answer.status).json(answer.body)


def _conflict(message: str, match: re.Match[str] | None) -> ErrorAnswer:
    body: dict[str, Any] = {"error": message}
    if match is not None:
        body["field"] = next(group for group in match.groups() if group)
    return ErrorAnswer(409, body)


def _validation(exc: BaseException) -> ErrorAnswer | None:
    text = str(exc)
    match = _ATTRIBUTE.search(text) or _UNKNOWN_ATTRIBUTE.search(text)
    if match is None:
        return None
    name = match.group(match.lastindex or 1)
    return ErrorAnswer(422, {"error": "validation failed", "errors": {name: [text]}})


def _raised_inside_pony(exc: BaseException) -> bool:
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return str(tb.tb_frame.f_globals.get("__name__", "")).startswith("pony.")


def _duplicate_key(exc: BaseException) -> ErrorAnswer | None:
    from socketify.db.documents.errors import DuplicateKeyError  # documents import us too

    if isinstance(exc, DuplicateKeyError):
        return ErrorAnswer(409, {"error": "already exists", "field": exc.field})
    return None


def integrity_error(exc: BaseException) -> BaseException | None:
    """The driver's integrity error behind `exc` (Pony wraps it once or twice), if any."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 8:
        seen += 1
        if type(current).__name__ == "IntegrityError":
            return getattr(current, "original_exc", None) or current
        wrapped = getattr(current, "original_exc", None)
        if wrapped is None and isinstance(current, orm.CommitException):
            wrapped = current.exceptions[0][1] if current.exceptions else None
        # Not __context__: an error raised while *handling* a conflict is not a conflict.
        current = wrapped or current.__cause__
    return None


# PostgreSQL: connection exceptions (class 08), and the server ending the session: admin
# shutdown (pg_terminate_backend, a fast stop), crash shutdown, cannot connect now.
_PG_GONE = ("57P01", "57P02", "57P03")
# MySQL/MariaDB client errors: cannot connect, server has gone away, lost connection during
# query; server errors: shutdown in progress, connection killed.
_MYSQL_GONE = frozenset({2003, 2006, 2013, 1053, 1927})


def connection_lost(exc: BaseException) -> bool:
    """Whether `exc` (or the driver error Pony wraps in it) says the database connection is
    gone: a 503 to retry, not a bug. Pony already runs a query again once on a fresh
    connection; this is what is left when that failed too."""
    error = getattr(exc, "original_exc", None) or exc
    name = type(error).__name__
    if name == "InterfaceError":  # psycopg2 "connection already closed", pymysql (0, '')
        return True
    if name != "OperationalError":
        return False
    if hasattr(error, "pgcode"):  # psycopg2
        code = error.pgcode
        return code is None or code.startswith("08") or code in _PG_GONE
    args: tuple[Any, ...] = getattr(error, "args", ())
    return bool(args) and args[0] in _MYSQL_GONE


def is_unique_violation(error: BaseException) -> bool:
    """Whether a driver's integrity error is a unique (or primary key) violation."""
    code = getattr(error, "pgcode", None)  # psycopg2
    if code is not None:
        return bool(code == "23505")
    args = getattr(error, "args", ())
    if args and args[0] == 1062:  # pymysql: ER_DUP_ENTRY
        return True
    name = getattr(error, "sqlite_errorname", "")  # sqlite3 (Python 3.11+)
    return name in ("SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY") or (
        "UNIQUE constraint failed" in str(error)
    )
