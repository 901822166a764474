"""socketify.py's middleware: `middleware(*functions)`, `MiddlewareRouter(app, *functions)`
and the decorator router `app.router(prefix, *functions)`.

socketify.py composes a route handler from functions `f(res, req, data)`: each gets what the
one before returned, a falsy return stops the chain (the function that stopped it has
answered), and the last one is the handler proper. Plain and `async def` functions mix; the
composed handler is `async def` as soon as one of them is, so the App awaits it like any
other async handler.

This is socketify.py's own shape, kept for its code; Socketify's middleware, `(req, res,
next)` added with `app.use`, is a separate thing and runs before these handlers.
`socketify.middleware`, the package of Socketify's middleware, is callable as this
`middleware` so that `from socketify import middleware` serves both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from socketify.core.coroutines import is_async
from socketify.core.routing import Router

if TYPE_CHECKING:
    from socketify.socketify_py.app import App

__all__ = ["DecoratorRouter", "MiddlewareRouter", "RouteTable", "middleware"]

Step = Callable[..., Any]


def middleware(*functions: Step) -> Callable[..., Any]:
    """One `(res, req, data=None)` handler running `functions` in order until one returns falsy."""
    for function in functions:
        if not callable(function):
            raise TypeError(f"middleware() takes functions, got {function!r}")
    if not any(is_async(function) for function in functions):

        def composed(res: Any, req: Any, data: Any = None) -> Any:
            for function in functions:
                data = function(res, req, data)
                if not data:
                    break
            return data

        return composed

    async def composed_async(res: Any, req: Any, data: Any = None) -> Any:
        for function in functions:
            data = function(res, req, data)
            if is_async(function):
                data = await data
            if not data:
                break
        return data

    return composed_async


class MiddlewareRouter:
    """Routes of `app` whose handlers run after the same middleware functions."""

    def __init__(self, app: App, *functions: Step) -> None:
        self.app = app
        self.functions = functions

    def route_with(self, method: str, path: str, handler: Step) -> MiddlewareRouter:
        """Register `middleware(*functions, handler)` for `method` on `path`."""
        self.app.route_with(method, path, middleware(*self.functions, handler))
        return self

    def get(self, path: str, handler: Step) -> MiddlewareRouter:
        """GET (and HEAD) on `path`."""
        return self.route_with("GET", path, handler)

    def post(self, path: str, handler: Step) -> MiddlewareRouter:
        """POST on `path`."""
        return self.route_with("POST", path, handler)

    def put(self, path: str, handler: Step) -> MiddlewareRouter:
        """PUT on `path`."""
        return self.route_with("PUT", path, handler)

    def patch(self, path: str, handler: Step) -> MiddlewareRouter:
        """PATCH on `path`."""
        return self.route_with("PATCH", path, handler)

    def delete(self, path: str, handler: Step) -> MiddlewareRouter:
        """DELETE on `path`."""
        return self.route_with("DELETE", path, handler)

    def options(self, path: str, handler: Step) -> MiddlewareRouter:
        """OPTIONS on `path`."""
        return self.route_with("OPTIONS", path, handler)

    def head(self, path: str, handler: Step) -> MiddlewareRouter:
        """HEAD on `path`."""
        return self.route_with("HEAD", path, handler)

    def connect(self, path: str, handler: Step) -> MiddlewareRouter:
        """CONNECT on `path`."""
        return self.route_with("CONNECT", path, handler)

    def trace(self, path: str, handler: Step) -> MiddlewareRouter:
        """TRACE on `path`."""
        return self.route_with("TRACE", path, handler)

    def any(self, path: str, handler: Step) -> MiddlewareRouter:
        """Every method on `path`."""
        return self.route_with("ANY", path, handler)


class DecoratorRouter:
    """`@router.get(path)` registers under `prefix`, after the middleware `functions`."""

    def __init__(self, app: App, prefix: str = "", *functions: Step) -> None:
        self.app = app
        self.prefix = prefix.rstrip("/")
        self.functions = functions

    def route(self, method: str, path: str) -> Callable[[Step], Step]:
        """A decorator registering its function for `method` on `prefix + path`."""

        def register(handler: Step) -> Step:
            served = middleware(*self.functions, handler) if self.functions else handler
            self.app.route_with(method, self.prefix + path, served)
            return handler

        return register

    def get(self, path: str) -> Callable[[Step], Step]:
        """GET (and HEAD) on `path`."""
        return self.route("GET", path)

    def post(self, path: str) -> Callable[[Step], Step]:
        """POST on `path`."""
        return self.route("POST", path)

    def put(self, path: str) -> Callable[[Step], Step]:
        """PUT on `path`."""
        return self.route("PUT", path)

    def patch(self, path: str) -> Callable[[Step], Step]:
        """PATCH on `path`."""
        return self.route("PATCH", path)

    def delete(self, path: str) -> Callable[[Step], Step]:
        """DELETE on `path`."""
        return self.route("DELETE", path)

    def options(self, path: str) -> Callable[[Step], Step]:
        """OPTIONS on `path`."""
        return self.route("OPTIONS", path)

    def head(self, path: str) -> Callable[[Step], Step]:
        """HEAD on `path`."""
        return self.route("HEAD", path)

    def connect(self, path: str) -> Callable[[Step], Step]:
        """CONNECT on `path`."""
        return self.route("CONNECT", path)

    def trace(self, path: str) -> Callable[[Step], Step]:
        """TRACE on `path`."""
        return self.route("TRACE", path)

    def any(self, path: str) -> Callable[[Step], Step]:
        """Every method on `path`."""
        return self.route("ANY", path)


class RouteTable(Router):
    """The App's route table, callable as socketify.py's `app.router(prefix, *functions)`.

    Socketify's `Application.router` is the route table, a name socketify.py uses for its
    decorator router: calling this table gives that router, so both keep their meaning.
    """

    __slots__ = ("app",)

    def __init__(self, app: App) -> None:
        super().__init__()
        self.app = app

    def __call__(self, prefix: str = "", *functions: Step) -> DecoratorRouter:
        """A `DecoratorRouter` for `prefix`, after the middleware `functions`."""
        return DecoratorRouter(self.app, prefix, *functions)
