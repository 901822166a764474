"""`Server`: the application object — options, middleware, routes, and `handle()`.

Theory of operation. `handle(req, res)` runs one request through the chain and never raises:

1. global middleware, in registration order, for every request (404s included);
2. when the last global middleware calls `next()`, the route lookup; no path match gives 404,
   a path match without the method gives 405 (or 204 with Allow for OPTIONS);
3. the matched route's frozen chain: group middleware, route middleware, handler.

A chain that stops without ending the response is finished for it: 404 if it stopped in a
global middleware, otherwise the response is auto-finalized (status as set, 200 by default).
Exceptions propagate up through `next()` — so a middleware can catch what it knows how to
map (the database middleware does) or use try/finally to log — and whatever reaches the top
becomes the error answer: `HTTPError` its status and message, anything else a 500 whose
traceback is logged (and shown in the body only with `debug=True`). Headers and cookies set
before the error are kept (SPEC §5.10 lost them).

Compression is server-level, not a middleware (SPEC §1.10.5): after the answer is final —
error pages included — the `Compressor` resolved once from `settings.compression` may encode
the body; it returns at once for a request without Accept-Encoding.

Serving (`listen`, `wait`, `stop`, `port`) lives in `socketify.server`, imported only when
called, so that `import socketify` never imports gevent.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from typing import Any

from socketify.core.callables import require_blocking
from socketify.core.chain import Hooked, Plan, Walk, compiled, flat_lines
from socketify.core.errors import HTTPError
from socketify.core.options import ServerOptions
from socketify.core.request import Request
from socketify.core.response import TEXT_PLAIN, Response
from socketify.core.routing import ANY, Group, Middleware, Registrar, Route, Router, allow_header
from socketify.middleware.compression import resolve as resolve_compression
from socketify.protocol.http11.status import reason

__all__ = ["ErrorHandler", "Server"]

ErrorHandler = Callable[[Request, Response, Exception], Any]

error_log = logging.getLogger("socketify.error")


class Server(Registrar):
    """A Socketify application: `Server(**options)`, then routes, middleware and `listen()`."""

    _handle: Callable[[Request, Response], None]  # the generated request path, made by freeze()

    def __init__(self, **options: Any) -> None:
        # Not `self.options`: that name is the OPTIONS route shorthand.
        self.settings = ServerOptions(**options)
        self.router = Router()
        self._middleware: list[Middleware] = []
        self._error_handler: ErrorHandler | None = None
        self._runner: Any = None
        self._compress = resolve_compression(self.settings.compression)
        self._frozen = False  # PERF: handle() checks a plain attribute, not the router's
        self._plan: Plan | None = None  # the global middleware chain, frozen with the routes

    # -- registration ---------------------------------------------------------------------

    def use(self, middleware: Middleware, *, first: bool = False) -> Server:
        """Add a global middleware `(req, res, next)`; runs for every request, in order.

        `first=True` puts it before those already added (the CLI's access log does this, so
        it sees every request, including those an app middleware answers itself).
        """
        self.router.check_open()
        require_blocking(middleware, "middleware")
        if first:
            self._middleware.insert(0, middleware)
        else:
            self._middleware.append(middleware)
        return self

    def _add(self, method: str, pattern: str, handler: Callable[..., Any]) -> Route:
        return self.router.add(method, pattern, handler)

    def ws(self, path: str, **behaviour: Any) -> Route:
        """A WebSocket route, uWebSockets style: `open=, message=, close=, drain=`, limits.

        See `socketify.realtime.pulse.routes.ws_handler` for the options; imported here, not at the
        top, so that `import socketify` stays free of gevent.
        """
        from socketify.realtime.pulse.routes import ws_handler

        return self.get(path, ws_handler(**behaviour))

    def group(self, prefix: str) -> Group:
        """Create a route group; its `.use()` middleware covers every route under `prefix`."""
        return self.router.add_group(prefix)

    def on_error(self, handler: ErrorHandler) -> ErrorHandler:
        """Set `handler(req, res, exc)` to answer unexpected exceptions (usable as decorator)."""
        require_blocking(handler, "the error handler")
        self._error_handler = handler
        return handler

    def freeze(self) -> None:
        """Resolve the route table and middleware chains; registration is closed afterwards."""
        if self._frozen:
            return
        self.router.freeze()
        if self._middleware:
            self._plan = Plan(self._middleware, self._dispatch)
        self._handle = self._generated_handle()
        if type(self).handle is Server.handle:
            # PERF: the generated function answers `app.handle(...)` itself, a call less
            # (not where a subclass wraps `handle`: its method stays in charge).
            self.handle = self._handle  # type: ignore[method-assign, assignment]
        self._frozen = True

    @property
    def debug(self) -> bool:
        """True when 500 bodies show the traceback."""
        return self.settings.debug

    # -- the request path -----------------------------------------------------------------

    def handle(self, req: Request, res: Response) -> None:
        """Run `req` through middleware, routing and handler into `res`; never raises."""
        if not self._frozen:
            self.freeze()
        self._handle(req, res)

    def _generated_handle(self) -> Callable[[Request, Response], None]:
        """`handle` for the frozen app, as one generated function.

        PERF: a flat global chain (every middleware `Hooked`, see `socketify.core.chain`) is
        written out inside it, so a request pays no call for the chain itself. The steps
        are those of the module doc: the chain, the dispatch at its end, 404 when it stopped
        unanswered (an answer it did not end is ended), the error answers, compression.
        """
        plan = self._plan
        names: dict[str, Any] = {
            "app": self,
            "end": self._dispatch,
            "plan": plan,
            "Walk": Walk,
            "HTTPError": HTTPError,
            "not_found": _not_found,
        }
        if plan is None:
            chain = ["        end(req, res)"]  # the dispatch always ends the response
        else:
            if plan.flat:
                hooked_chain = [h for h in plan.handlers[: plan.last] if isinstance(h, Hooked)]
                chain, hooks = flat_lines(hooked_chain, "        ")
                names.update(hooks)
            else:
                chain = [
                    "        walk = Walk(plan, req, res)",
                    "        walk.run(0)",
                    "        reached = walk.reached",
                ]
            chain += [
                "        if not res._ended:",
                "            if reached:",
                "                res.end()",
                "            else:",
                "                not_found(res)",
            ]
        lines = [
            "def handle(req, res):",
            "    try:",
            *chain,
            "    except HTTPError as exc:",
            "        app._answer_http_error(res, exc)",
            "    except Exception as exc:",
            "        app._answer_exception(req, res, exc)",
        ]
        if self._compress is not None:
            names["compress"] = self._compress
            lines += [
                "    try:",
                "        compress(req, res)",
                "    except Exception as exc:",  # an encoder bug must not lose a good answer
                "        app._compression_failed(req, exc)",
            ]
        label = "handle: " + (", ".join(m.__name__ for m in self._middleware) or "-")
        handle: Callable[[Request, Response], None] = compiled(
            "\n".join([*lines, ""]), names, "handle", label
        )
        return handle

    def _compression_failed(self, req: Request, exc: Exception) -> None:
        error_log.error("compression failed for %s %s", req.method, req.raw_target, exc_info=exc)

    def _dispatch(self, req: Request, res: Response) -> None:
        raw_path = req.head.path
        method = req.method
        # PERF: a static route answering this method is found here, without a call.
        table = self.router.static_paths.get(raw_path)
        route = (table.get(method) or table.get(ANY)) if table is not None else None
        if route is not None:
            params = None
        elif raw_path == "*":  # asterisk-form: `OPTIONS * HTTP/1.1` asks about the server
            if method != "OPTIONS":
                raise HTTPError(400, "Only OPTIONS may use the * target")
            res.set_header("Allow", allow_header(self.router.methods(), with_options=True))
            res.send_status(204)
            return
        else:
            route, params, allowed = self.router.find(method, raw_path)
        if route is None:
            if allowed is None:
                _not_found(res)
            elif req.method == "OPTIONS":
                res.set_header("Allow", allow_header(allowed, with_options=True))
                res.send_status(204)
            else:
                res.set_header("Allow", allow_header(allowed))
                res.status(405).send("Method Not Allowed\n", TEXT_PLAIN)
            return
        if params:
            req.params = params
        plan = route.plan
        if plan is None:
            route.handler(req, res)
        elif plan.run is not None:
            plan.run(req, res)
        else:
            Walk(plan, req, res).run(0)
        if not res._ended:  # PERF: the slot, not the `ended` property, on every request
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

    # -- serving (socketify.server; imported lazily to keep this module gevent-free) ------

    def listen(
        self, port: int = 8080, host: str = "0.0.0.0", *, binds: list[str] | None = None
    ) -> Server:
        """Start serving on `host:port` (or every `binds` entry); returns once workers serve."""
        from socketify.server.launch import launch  # lazy: keeps gevent out of `import socketify`

        self.freeze()
        addresses = binds if binds is not None else [_bind_text(host, port)]
        self._runner = launch(self, addresses)
        return self

    def wait(self) -> None:
        """Block until the server stops (signal or `stop()`)."""
        self._require_runner().wait()

    def stop(self) -> None:
        """Stop serving gracefully."""
        self._require_runner().stop()

    @property
    def port(self) -> int:
        """The bound port (useful after `listen(0)`)."""
        return int(self._require_runner().port)

    def _require_runner(self) -> Any:
        if self._runner is None:
            raise RuntimeError("the server is not listening; call listen() first")
        return self._runner


def _bind_text(host: str, port: int) -> str:
    # An IPv6 literal needs brackets so the port stays separable.
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def _not_found(res: Response) -> None:
    # SPEC §1.2: headers middleware set (CORS, X-Request-Id...) stay, a Content-Type included.
    res.replace_body(b"")
    res.status(404).send("Not Found\n", TEXT_PLAIN)
