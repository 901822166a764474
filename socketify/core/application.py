"""`Application`: options, middleware, routes, and `handle()` — everything but the IO.

Registration (`get`, `use`, `group`, `host`, `instrument`, `on_error`...) fills the tables;
`freeze()` resolves them and hands them to a `Dispatcher` (`core.dispatch`), which answers
every request from then on: its module tells the request path (instruments, global
middleware, routing, the route's chain, error answers, compression). `handle(req, res)`
freezes on first use and never raises.

Users build `socketify.Server`, this class plus serving (`listen`) and WebSocket routes
(`ws`); the layers above (the IO in `socketify.server`, `TestClient`) only need this one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mypy_extensions import mypyc_attr

from socketify.core.compression import resolve as resolve_compression
from socketify.core.coroutines import blocking, blocking_middleware
from socketify.core.dispatch import Answer, Dispatcher, ErrorHandler, Instrument
from socketify.core.hosts import HostRouter, HostTable
from socketify.core.options import ServerOptions
from socketify.core.request import Request
from socketify.core.response import Response
from socketify.core.routing import Group, Middleware, Registrar, Route, Router
from socketify.core.templates import Templates

__all__ = ["Answer", "Application", "ErrorHandler", "Instrument"]


# `Server` (and apps) subclass it; compiled, that must be allowed by name.
@mypyc_attr(allow_interpreted_subclasses=True)
class Application(Registrar):
    """Routes, middleware and options; `handle(req, res)` answers one request."""

    def __init__(self, **options: Any) -> None:
        # Not `self.options`: that name is the OPTIONS route shorthand.
        self.settings = ServerOptions(**options)
        self.router = Router()
        self._middleware: list[Middleware] = []
        self._error_handler: ErrorHandler | None = None
        self._compress = resolve_compression(self.settings.compression)
        self.hosts = HostTable()
        self._instruments: list[Instrument] = []
        self._dispatcher: Dispatcher | None = None  # made by `freeze`
        folder = self.settings.templates
        # What `res.render` reads; Jinja2 itself is loaded on the first render.
        self.templates = Templates(folder) if folder is not None else None

    # -- registration ---------------------------------------------------------------------

    def use(self, middleware: Middleware, *, first: bool = False) -> Application:
        """Add a global middleware `(req, res, next)`; runs for every request, in order.

        `first=True` puts it before those already added (the CLI's access log does this, so
        it sees every request, including those an app middleware answers itself).
        """
        self.router.check_open()
        middleware = blocking_middleware(middleware, "middleware")
        if first:
            self._middleware.insert(0, middleware)
        else:
            self._middleware.append(middleware)
        return self

    def _add(self, method: str, pattern: str, handler: Callable[..., Any]) -> Route:
        return self.router.add(method, pattern, handler)

    def group(self, prefix: str) -> Group:
        """Create a route group; its `.use()` middleware covers every route under `prefix`."""
        return self.router.add_group(prefix)

    def host(self, pattern: str) -> HostRouter:
        """The router of requests for host `pattern` ("api.example.com" or "*.example.com").

        It has its own routes and middleware (`get`, `post`, `use`, `group`...); it is chosen
        by the TLS SNI name, else the Host header; other hosts get this server's routes.
        """
        self.router.check_open()
        return self.hosts.add(pattern)

    def on_error(self, handler: ErrorHandler) -> ErrorHandler:
        """Set `handler(req, res, exc)` to answer unexpected exceptions (usable as decorator)."""
        self._error_handler = blocking(handler, "the error handler")
        if self._dispatcher is not None:
            self._dispatcher.error_handler = self._error_handler
        return handler

    def instrument(self, wrapper: Instrument) -> None:
        """Wrap every request in `wrapper(req, res, answer)`, outside all middleware.

        For metrics and tracing: the wrapper sees the request before anything runs and the
        final answer (status, route) after; it must call `answer(req, res)` once. The first
        one added is the outermost.
        """
        self.router.check_open()
        self._instruments.append(wrapper)

    def freeze(self) -> None:
        """Resolve the route table and middleware chains; registration is closed afterwards."""
        if self._dispatcher is not None:
            return
        self.router.freeze()
        settings = self.settings
        self._dispatcher = Dispatcher(
            self.router,
            self.hosts,
            self._middleware,
            self._instruments,
            compress=self._compress,
            templates=self.templates,
            max_json_size=settings.max_json_size,
            debug=settings.debug,
            error_handler=self._error_handler,
        )

    @property
    def debug(self) -> bool:
        """True when 500 bodies show the traceback."""
        return self.settings.debug

    # -- the request path -----------------------------------------------------------------

    @property
    def dispatcher(self) -> Dispatcher:
        """What answers this application's requests (freezes it on first use)."""
        if self._dispatcher is None:
            self.freeze()
        assert self._dispatcher is not None
        return self._dispatcher

    def handle(self, req: Request, res: Response) -> None:
        """Run `req` through middleware, routing and handler into `res`; never raises."""
        dispatcher = self._dispatcher or self.dispatcher  # frozen on first use
        dispatcher.handle(req, res)
