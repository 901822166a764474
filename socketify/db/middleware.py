"""One `db_session` per request: commit on success, roll back on error, errors mapped to HTTP.

    server.use(socketify.db.middleware(db))       # every request (a group or route works too)

    @server.post("/users")
    @socketify.db.transactional                   # or just this handler
    def create_user(req, res): ...

The session is Pony's `db_session`, so everything inside — entity access, relations, hooks,
raw `db.select` — shares one transaction, and a connection is taken from the pool only at the
first query and given back when the session ends. Pony errors that are the client's doing
become JSON answers (see `socketify.db.errors`); the rest propagate and become a 500.

A response streamed with `res.stream(...)` is produced after the session has ended: read what
it needs inside the handler.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

from pony.orm import core as orm_core

from socketify.db import green
from socketify.db.errors import ErrorAnswer, answer_for
from socketify.db.session import run_in_db_session

__all__ = ["middleware", "transactional"]

log = logging.getLogger("socketify.db")


def middleware(db: Any = None) -> Callable[[Any, Any, Callable[[], None]], None]:
    """A `(req, res, next)` middleware running the rest of the chain in one `db_session`."""
    if db is not None and getattr(db, "provider", None) is None:
        raise ValueError("bind the database (socketify.db.connect) before using its middleware")

    def db_middleware(req: Any, res: Any, next: Callable[[], None]) -> None:
        run_in_session(next, res)

    return db_middleware


def transactional(handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Decorate a `(req, res)` handler to run in its own `db_session`, errors mapped."""

    @functools.wraps(handler)
    def wrapper(req: Any, res: Any) -> Any:
        return run_in_session(lambda: handler(req, res), res)

    return wrapper


def run_in_session(call: Callable[[], Any], res: Any) -> Any:
    """Run `call()` in a `db_session`; answer `res` when it fails with a mapped DB error."""
    if green.adopted_local is not threading.local:
        green.adopt_gevent()  # gevent patched after Pony was imported: make its state local
    state = orm_core.local.__dict__
    if state["db_session"] is not None:
        # Nested (middleware plus decorator): the outermost session maps the error, after
        # rolling everything back; answering here would let the outer session commit.
        return call()
    try:
        return run_in_db_session(call, state)
    except Exception as exc:
        answer = answer_for(exc)
        if answer is None:
            raise
        _send(res, answer, exc)
        return None


def _send(res: Any, answer: ErrorAnswer, exc: Exception) -> None:
    if answer.status >= 500:
        log.warning("database error answered %d: %s", answer.status, exc)
    else:
        log.debug("database error answered %d: %s", answer.status, exc)
    res.reset_for_error()
    for name, value in answer.headers.items():
        res.set_header(name, value)
    res.status(answer.status).json(answer.body)
