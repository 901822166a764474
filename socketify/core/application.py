"""`Application`: options, middleware, routes, and `handle()` — everything but the IO.

Theory of operation. `handle(req, res)` runs one request through the chain and never raises:

1. global middleware, in registration order, for every request (404s included);
2. when the last global middleware calls `next()`, the route lookup; no path match gives 404,
   a path match without the method gives 405 (or 204 with Allow for OPTIONS);
3. the matched route's frozen chain: group middleware, route middleware, handler.

With host routers (`host("api.example.com")`, see `core.hosts`), step 2 first picks the
router of the request's host, which runs its own middleware, then steps 2 and 3 on its own
routes; a host no router matches uses the server's routes.

A chain that stops without ending the response is finished for it: 404 if it stopped in a
global middleware, otherwise the response is auto-finalized (status as set, 200 by default).
Exceptions propagate up through `next()` — so a middleware can catch what it knows how to
map (the database middleware does) or use try/finally to log — and whatever reaches the top
becomes the error answer: `HTTPError` its status and message, anything else a 500 whose
traceback is logged (and shown in the body only with `debug=True`). Headers and cookies set
before the error are kept.

Compression is a server setting, not a middleware: after the answer is final (error pages
included) the compressor resolved once from `settings.compression` may encode the body; it
returns at once for a request without Accept-Encoding.

Users build `socketify.Server`, this class plus serving (`listen`) and WebSocket routes
(`ws`); the layers above (the IO in `socketify.server`, `TestClient`) only need this one.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from typing import Any

from mypy_extensions import mypyc_attr

from socketify.core.chain import Chain
from socketify.core.compression import resolve as resolve_compression
from socketify.core.coroutines import blocking, blocking_middleware
from socketify.core.errors import HTTPError
from socketify.core.hosts import HostRouter, HostTable, request_host
from socketify.core.options import ServerOptions
from socketify.core.request import Request
from socketify.core.response import TEXT_PLAIN, Response
from socketify.core.routing import ANY, Group, Middleware, Registrar, Route, Router, allow_header
from socketify.core.templates import Templates
from socketify.protocol.http11.status import reason

__all__ = ["Answer", "Application", "ErrorHandler", "Instrument"]

ErrorHandler = Callable[[Request, Response, Exception], Any]
Answer = Callable[[Request, Response], None]
# `wrapper(req, res, answer)` must call `answer(req, res)` exactly once (see `instrument`).
Instrument = Callable[[Request, Response, Answer], None]

error_log = logging.getLogger("socketify.error")


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
        self._chain: Chain | None = None  # the global chain, made when the routes freeze
        self.hosts = HostTable()
        self._hosts: HostTable | None = None  # `hosts` once frozen, when it has any
        self._instruments: list[Instrument] = []
        self._around: Answer | None = None  # the instruments around `_answer`, once frozen
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
        if self._chain is not None:
            return
        self.router.freeze()
        self.hosts.freeze(self._dispatch_route)
        self._hosts = self.hosts if self.hosts else None
        self._chain = Chain(self._middleware, self._dispatch)
        around: Answer | None = None
        for wrapper in reversed(self._instruments):
            around = _wrapped(wrapper, around or self._answer)
        self._around = around

    @property
    def debug(self) -> bool:
        """True when 500 bodies show the traceback."""
        return self.settings.debug

    # -- the request path -----------------------------------------------------------------

    def handle(self, req: Request, res: Response) -> None:
        """Run `req` through middleware, routing and handler into `res`; never raises."""
        if self._chain is None:
            self.freeze()
        around = self._around
        if around is None:
            self._answer(req, res)
        else:
            around(req, res)

    def _answer(self, req: Request, res: Response) -> None:
        chain = self._chain
        assert chain is not None
        res.templates = self.templates
        req.max_json_size = self.settings.max_json_size
        try:
            chain.run(req, res)
            if not res.ended:
                _not_found(res)  # a global middleware stopped without answering
        except HTTPError as exc:
            self._answer_http_error(res, exc)
        except Exception as exc:
            self._answer_exception(req, res, exc)
        if self._compress is not None:
            try:
                self._compress(req, res)
            except Exception as exc:  # an encoder bug must not lose a good answer
                error_log.error(
                    "compression failed for %s %s", req.method, req.raw_target, exc_info=exc
                )

    def _dispatch(self, req: Request, res: Response) -> None:
        """The end of the global chain: find the route, run its chain, finish the answer."""
        method = req.method
        path = req.head.path
        if path == "*":  # asterisk-form: `OPTIONS * HTTP/1.1` asks about the server
            if method != "OPTIONS":
                raise HTTPError(400, "Only OPTIONS may use the * target")
            res.set_header("Allow", allow_header(self.router.methods(), with_options=True))
            res.send_status(204)
            return
        hosts = self._hosts
        if hosts is not None:
            host = hosts.match(request_host(req))
            if host is not None:
                assert host.chain is not None
                host.chain.run(req, res)
                if not res.ended:
                    _not_found(res)  # a host middleware stopped without answering
                return
        self._dispatch_route(self.router, req, res)

    def _dispatch_route(self, router: Router, req: Request, res: Response) -> None:
        """Find the route of `router` for `req`, run its chain, finish the answer."""
        method = req.method
        path = req.head.path
        # PERF: a static path's route first, as `Router.find` would look it up: most requests
        # go to one, and this spares them a call.
        table = router.static_paths.get(path)
        route = (table.get(method) or table.get(ANY)) if table is not None else None
        if route is not None:
            params = allowed = None
        else:
            route, params, allowed = router.find(method, path)
        if route is None:
            if allowed is None:
                _not_found(res)
            elif method == "OPTIONS":
                res.set_header("Allow", allow_header(allowed, with_options=True))
                res.send_status(204)
            else:
                res.set_header("Allow", allow_header(allowed))
                res.status(405).send("Method Not Allowed\n", TEXT_PLAIN)
            return
        if params:
            req.params = params
        req.route = route.pattern
        route.chain.run(req, res)
        if not res.ended:
            res.end()  # auto-finalize: the handler (or a middleware) returned without ending

    # -- errors ---------------------------------------------------------------------------

    def _answer_http_error(self, res: Response, exc: HTTPError) -> None:
        try:
            res.reset_for_error()
            res.status(exc.status)
            for name, value in exc.headers.items():
                res.set_header(name, value)
            message = exc.message if exc.message is not None else reason(exc.status)
            res.send(message + "\n", TEXT_PLAIN)
        except Exception as failure:  # e.g. a bad status or header inside the HTTPError
            error_log.error("invalid HTTPError %r", exc, exc_info=failure)
            self._generic_500(res, None)

    def _answer_exception(self, req: Request, res: Response, exc: Exception) -> None:
        error_log.error("unhandled exception in %s %s", req.method, req.raw_target, exc_info=exc)
        handler = self._error_handler
        if handler is not None:
            try:
                res.reset_for_error()
                res.status(500)
                handler(req, res, exc)
                if not res.ended:
                    res.end()
                return
            except Exception as failure:
                error_log.error("the on_error handler failed", exc_info=failure)
        self._generic_500(res, exc)

    def _generic_500(self, res: Response, exc: Exception | None) -> None:
        res.reset_for_error()
        body = "Internal Server Error\n"
        if self.settings.debug and exc is not None:
            body += "\n" + "".join(traceback.format_exception(exc))
        res.status(500).send(body, TEXT_PLAIN)


def _not_found(res: Response) -> None:
    # Headers middleware set (CORS, X-Request-Id...) stay, a Content-Type included.
    res.replace_body(b"")
    res.status(404).send("Not Found\n", TEXT_PLAIN)


def _wrapped(wrapper: Instrument, inner: Answer) -> Answer:
    def answer(req: Request, res: Response) -> None:
        wrapper(req, res, inner)

    return answer
