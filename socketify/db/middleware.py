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

Theory of operation. The middleware is a hooked one, `hooked(open_session, close_session)`:
the chain calls the two hooks directly, with no `next` to build, and `close_session` returns
True when it answered the error. The hooks of this module use only Pony's public API: they
enter and leave Pony's `db_session` context manager. With the fast path on (the database's
`fast_path`; for `transactional` and a middleware given no database, the process's setting),
`middleware` returns the hooks of `socketify.db.fastpath.session` instead, which do the same
on the greenlet's Pony state in fewer steps.

A session nested in another (a route's middleware inside the server's, `transactional` inside
either, or the application's own `with db_session`) is counted by Pony and committed by the
outermost one. When the inner one answers an error, it first rolls the whole session back
(Pony's `rollback()`), so the outer one has nothing left to commit.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from pony.orm import db_session, rollback

import socketify.db.fastpath as fastpath
import socketify.db.green as green
from socketify.core.chain import Hooked, hooked
from socketify.db.errors import answer_for, send_answer

__all__ = ["close_session", "in_db_session", "middleware", "open_session", "transactional"]


def middleware(db: Any = None) -> Hooked:
    """A `(req, res, next)` middleware running the rest of the chain in one `db_session`."""
    if db is not None and getattr(db, "provider", None) is None:
        raise ValueError("bind the database (socketify.db.connect) before using its middleware")
    fast = getattr(db, "fast_path", None)
    if fast is None:
        fast = fastpath.resolve()
    if fast:
        from socketify.db.fastpath import session

        return hooked(session.open_session, session.close_session, name="db_session")
    return hooked(open_session, close_session, name="db_session")


def transactional(handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Decorate a `(req, res)` handler to run in its own `db_session`, errors mapped."""
    if fastpath.resolve():
        from socketify.db.fastpath.session import in_db_session as run
    else:
        run = in_db_session

    @functools.wraps(handler)
    def wrapper(req: Any, res: Any) -> Any:
        return run(req, res, functools.partial(handler, req, res))

    return wrapper


def in_db_session(req: Any, res: Any, next: Callable[[], Any]) -> Any:
    """Run `next()` in a `db_session` and return its result; answer `res` when it fails with
    a mapped database error (the middleware, in its `(req, res, next)` form)."""
    if green.adopted_local is not threading.local:
        green.adopt_gevent()  # gevent patched after Pony was imported: make its state local
    try:
        with db_session:
            return next()
    except Exception as exc:
        answer = answer_for(exc)
        if answer is None:
            raise
        rollback()  # nested in another session: that one must not commit
        send_answer(res, answer, exc)
        return None


def open_session(req: Any, res: Any) -> bool:
    """The hooked middleware's `before`: enter Pony's `db_session`."""
    if green.adopted_local is not threading.local:
        green.adopt_gevent()
    db_session.__enter__()
    return True


def close_session(req: Any, res: Any, error: BaseException | None) -> bool:
    """The hooked middleware's `after`: leave the `db_session` (the outermost commits, or rolls
    back after `error`); True when it answered `error`, or a failed commit, as HTTP."""
    try:
        if error is None:
            db_session.__exit__(None, None, None)
        else:
            db_session.__exit__(type(error), error, error.__traceback__)
    except Exception as exc:  # the commit failed: its error is answered, or raised
        answer = answer_for(exc)
        if answer is None:
            raise
        send_answer(res, answer, exc)
        return True
    answer = answer_for(error) if isinstance(error, Exception) else None
    if answer is None or error is None:
        return False  # the chain raises the error on
    rollback()  # nested in another session: that one must not commit
    send_answer(res, answer, error)
    return True
