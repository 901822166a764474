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

Theory of operation. The session is opened and ended with `socketify.db.session`'s steps on
the greenlet's Pony state, written out here rather than through `run_in_db_session` (PERF:
three Python calls less per request). The middleware is a hooked one,
`hooked(open_session, close_session)`: the chain calls the two hooks directly, with no `next`
to build, and `close_session` returns True when it answered the error. A session nested in
another (middleware plus decorator) leaves the ending to the outermost one, which maps the
error after rolling everything back: answering in the inner one would let the outer session
commit.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

from pony.orm import core as orm_core

from socketify.core.chain import hooked
from socketify.db import green
from socketify.db.errors import ErrorAnswer, answer_for
from socketify.db.session import abort_session, end_session

__all__ = ["close_session", "in_db_session", "middleware", "open_session", "transactional"]

log = logging.getLogger("socketify.db")

_db_session = orm_core.db_session  # Pony's default session, as `run_in_db_session` opens


def middleware(db: Any = None) -> Callable[[Any, Any, Callable[[], None]], Any]:
    """A `(req, res, next)` middleware running the rest of the chain in one `db_session`."""
    if db is not None and getattr(db, "provider", None) is None:
        raise ValueError("bind the database (socketify.db.connect) before using its middleware")
    return hooked(open_session, close_session, name="db_session")


def transactional(handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Decorate a `(req, res)` handler to run in its own `db_session`, errors mapped."""

    @functools.wraps(handler)
    def wrapper(req: Any, res: Any) -> Any:
        return in_db_session(req, res, functools.partial(handler, req, res))

    return wrapper


def in_db_session(req: Any, res: Any, next: Callable[[], Any]) -> Any:
    """Run `next()` in a `db_session` and return its result; answer `res` when it fails with
    a mapped database error (the middleware, in its `(req, res, next)` form)."""
    if green.adopted_local is not threading.local:
        green.adopt_gevent()  # gevent patched after Pony was imported: make its state local
    state = orm_core.local.__dict__
    if state["db_session"] is not None:
        return next()  # nested: the outermost session ends it and maps the error
    if state["db_context_counter"]:
        raise RuntimeError("a db_session is being entered or left in this greenlet")
    state["db_session"] = _db_session  # `enter_session`, written out
    state["db_context_counter"] = 1
    try:
        try:
            result = next()
        except BaseException as exc:
            abort_session(state, exc)
            raise
        end_session(state)
        return result
    except Exception as exc:
        answer = answer_for(exc)
        if answer is None:
            raise
        _send(res, answer, exc)
        return None


def open_session(req: Any, res: Any) -> bool:
    """The hooked middleware's `before`: open the session, or count one more nesting level."""
    if green.adopted_local is not threading.local:
        green.adopt_gevent()
    state = orm_core.local.__dict__
    if state["db_session"] is None:
        if state["db_context_counter"]:
            raise RuntimeError("a db_session is being entered or left in this greenlet")
        state["db_session"] = _db_session
        state["db_context_counter"] = 1
    else:
        # Nested in another session: Pony's own nesting count, which `close_session` lowers.
        state["db_context_counter"] += 1
    return True


def close_session(req: Any, res: Any, error: BaseException | None) -> bool:
    """The hooked middleware's `after`: end the session (commit, or roll back after `error`);
    True when it answered `error`, or a failed commit, as HTTP."""
    state = orm_core.local.__dict__
    level = state["db_context_counter"] - 1
    if level:
        state["db_context_counter"] = level
        return False  # nested: the outermost session ends it and maps the error
    try:
        if error is None:
            end_session(state)
            return False
        abort_session(state, error)
    except Exception as exc:  # the commit failed: its error is answered, or raised
        answer = answer_for(exc)
        if answer is None:
            raise
        _send(res, answer, exc)
        return True
    answer = answer_for(error) if isinstance(error, Exception) else None
    if answer is None:
        return False  # the chain raises the error on
    _send(res, answer, error)
    return True


def _send(res: Any, answer: ErrorAnswer, exc: BaseException) -> None:
    if answer.status >= 500:
        log.warning("database error answered %d: %s", answer.status, exc)
    else:
        log.debug("database error answered %d: %s", answer.status, exc)
    res.reset_for_error()
    for name, value in answer.headers.items():
        res.set_header(name, value)
    res.status(answer.status).json(answer.body)
