"""`WsgiHandler`: a WSGI application as a Socketify route handler.

`server.mount(prefix, app)` routes every method under `prefix` to one of these, so the
server's own middleware runs first and the WSGI app answers what reaches it; `socketify run`
serves a WSGI app with a server that is only the app: `answer_all` answers every request as
a global middleware hook, with no routing. The app runs inline in the request's
greenlet, as any handler does: its blocking calls (the body it reads, its database, its
outgoing HTTP) park only that greenlet.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from socketify.wsgi.answer import Answer
from socketify.wsgi.environ import EnvironBuilder

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = ["WsgiApp", "WsgiHandler", "looks_like_wsgi"]

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
WHOLE_APP_ROUTE = "/*wsgi_path"  # the pattern a mount at "/" would have


class WsgiHandler:
    """Answers each request with the WSGI `app`, mounted at `mount_path` under `root_path`."""

    __slots__ = ("app", "environ")

    def __init__(self, app: WsgiApp, mount_path: str = "", root_path: str = "") -> None:
        if not callable(app):
            raise TypeError(f"a WSGI application must be callable, got {app!r}")
        self.app = app
        self.environ = EnvironBuilder(mount_path, root_path)

    def __call__(self, req: Request, res: Response) -> None:
        answer = Answer(res)
        answer.respond(self.app(self.environ.build(req), answer.start_response))

    def answer_all(self, req: Request, res: Response) -> bool:
        """Answer `req`; False ends the chain, as the `before` hook of a server that is only
        this app (see `socketify.core.chain.hooked`)."""
        req.route = WHOLE_APP_ROUTE  # what metrics and traces name these requests by
        self(req, res)
        return False

    def __repr__(self) -> str:
        return f"<WsgiHandler {self.app!r} at {self.environ.mount_path or '/'}>"


def looks_like_wsgi(candidate: object) -> bool:
    """Whether `candidate` is a callable taking (environ, start_response): a WSGI app.

    A Socketify app factory takes no arguments; a Flask or Django app, or a plain
    `def app(environ, start_response)`, takes exactly these two.
    """
    if not callable(candidate) or isinstance(candidate, type):
        return False
    try:
        signature = inspect.signature(candidate)
    except (TypeError, ValueError):
        return False
    try:
        signature.bind(object(), object())
    except TypeError:
        return False
    try:
        signature.bind()
    except TypeError:
        return True
    return False  # takes two arguments or none: a factory with defaults, not a WSGI app
