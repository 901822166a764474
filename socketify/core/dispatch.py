"""`Dispatcher`: the request path of a frozen application, from `handle(req, res)` to the answer.

Theory of operation. `Application` collects routes, middleware and options; when it freezes,
it hands what a request needs (the router, the host routers, the global middleware, the
instruments, the compressor, the error handler) to one `Dispatcher`, and `handle` is its:

1. the instruments, the first added outermost, around step 2;
2. global middleware, in registration order, for every request (404s included);
3. when the last global middleware calls `next()`, the route lookup; no path match gives 404,
   a path match without the method gives 405 (or 204 with Allow for OPTIONS);
4. the matched route's frozen chain: group middleware, route middleware, handler.

With host routers (`host("api.example.com")`, see `core.hosts`), step 3 first picks the
router of the request's host, which runs its own middleware, then steps 3 and 4 on its own
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

Nothing subclasses `Dispatcher` (apps subclass `Application`), so a compiled build calls
between its methods directly; that is why the request path lives here and not in
`Application`, whose compiled methods must stay overridable.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from socketify.core.chain import Chain
from socketify.core.errors import HTTPError
from socketify.core.hosts import HostTable, request_host
from socketify.core.request import Request
from socketify.core.response import TEXT_PLAIN, Response
from socketify.core.routing import ANY, Middleware, Router, allow_header
from socketify.protocol.http11.status import reason

if TYPE_CHECKING:
    from socketify.core.templates import Templates

__all__ = ["Answer", "Dispatcher", "ErrorHandler", "Instrument"]

ErrorHandler = Callable[[Request, Response, Exception], Any]
Answer = Callable[[Request, Response], None]
# `wrapper(req, res, answer)` must call `answer(req, res)` exactly once (see `instrument`).
Instrument = Callable[[Request, Response, Answer], None]
Compressor = Callable[[Request, Response], None]

error_log: Final = logging.getLogger("socketify.error")


class Dispatcher:
    """Answers requests for a frozen application: `handle(req, res)`, which never raises."""

    def __init__(
        self,
        router: Router,
        hosts: HostTable,
        middleware: list[Middleware],
        instruments: list[Instrument],
        *,
        compress: Compressor | None,
        templates: Templates | None,
        max_json_size: int,
        debug: bool,
        error_handler: ErrorHandler | None,
    ) -> None:
        self.router = router
        hosts.freeze(self.dispatch_route)
        self.hosts: HostTable | None = hosts if hosts else None
        # PERF: without global middleware the dispatch is called directly, not as the end of
        # an empty chain: a compiled build then makes a native call, not a Python-level one.
        self.chain: Chain | None = Chain(middleware, self.dispatch) if middleware else None
        around: Answer | None = None
        for wrapper in reversed(instruments):
            around = _wrapped(wrapper, around or self.answer)
        self.around = around
        self.compress = compress
        self.templates = templates
        self.max_json_size = max_json_size
        self.debug = debug
        # Settable after the freeze: `on_error` may come late (socketify.py's apps do that).
        self.error_handler = error_handler

    def handle(self, req: Request, res: Response) -> None:
        """Run `req` through instruments, middleware, routing and handler into `res`."""
        around = self.around
        if around is None:
            self.answer(req, res)
        else:
            around(req, res)

    def answer(self, req: Request, res: Response) -> None:
        """`handle` inside the instruments."""
        res.templates = self.templates
        req.max_json_size = self.max_json_size
        try:
            chain = self.chain
            if chain is None:
                self.dispatch(req, res)
            else:
                chain.run(req, res)
                if not res.ended:
                    _not_found(res)  # a global middleware stopped without answering
        except HTTPError as exc:
            self.answer_http_error(res, exc)
        except Exception as exc:
            self.answer_exception(req, res, exc)
        compress = self.compress
        if compress is not None:
            try:
                compress(req, res)
            except Exception as exc:  # an encoder bug must not lose a good answer
                error_log.error(
                    "compression failed for %s %s", req.method, req.raw_target, exc_info=exc
                )

    def dispatch(self, req: Request, res: Response) -> None:
        """The end of the global chain: find the route, run its chain, finish the answer."""
        path = req.head.path
        if path == "*":  # asterisk-form: `OPTIONS * HTTP/1.1` asks about the server
            if req.method != "OPTIONS":
                raise HTTPError(400, "Only OPTIONS may use the * target")
            res.set_header("Allow", allow_header(self.router.methods(), with_options=True))
            res.send_status(204)
            return
        hosts = self.hosts
        if hosts is not None:
            host = hosts.match(request_host(req))
            if host is not None:
                assert host.chain is not None
                host.chain.run(req, res)
                if not res.ended:
                    _not_found(res)  # a host middleware stopped without answering
                return
        self.dispatch_route(self.router, req, res)

    def dispatch_route(self, router: Router, req: Request, res: Response) -> None:
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

    def answer_http_error(self, res: Response, exc: HTTPError) -> None:
        """Answer with the status, headers and message of `exc`."""
        try:
            res.reset_for_error()
            res.status(exc.status)
            for name, value in exc.headers.items():
                res.set_header(name, value)
            message = exc.message if exc.message is not None else reason(exc.status)
            res.send(message + "\n", TEXT_PLAIN)
        except Exception as failure:  # e.g. a bad status or header inside the HTTPError
            error_log.error("invalid HTTPError %r", exc, exc_info=failure)
            self.generic_500(res, None)

    def answer_exception(self, req: Request, res: Response, exc: Exception) -> None:
        """Log `exc` and answer 500, through the app's error handler when it has one."""
        error_log.error("unhandled exception in %s %s", req.method, req.raw_target, exc_info=exc)
        handler = self.error_handler
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
        self.generic_500(res, exc)

    def generic_500(self, res: Response, exc: Exception | None) -> None:
        """The plain 500; with `debug`, its body shows the traceback of `exc`."""
        res.reset_for_error()
        body = "Internal Server Error\n"
        if self.debug and exc is not None:
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
