"""socketify.py's `App`: its routes, WebSockets, topics and `listen`/`run`, on a Socketify Server.

`App` *is* a `socketify.Server`, so `socketify run module:app` serves it like any other app,
pre-forked, with every command-line option; `python app.py` ending in `app.run()` starts the
same pre-fork master. What changes is the face: route handlers take socketify.py's
`(res, req)` (`socketify.socketify_py.request`, `.response`, served by `.handlers`),
`app.ws(path, behavior)` takes its dict (`.behaviors`, `.websocket`), and
`listen(port, handler)` only records where to listen:
`run()` binds, forks the workers, calls the handlers with the bound `AppListenOptions`, and
supervises until a signal stops the server.

Handlers may be `async def`, as in socketify.py; they run on the worker's asyncio loop (see
`socketify.core.coroutines`), and `socketify.socketify_py.handlers` serves each one.
Socketify middleware (`app.use`, `(req, res, next)` with Socketify's own Request and
Response) runs before them.

`app.close()` from a handler stops the whole server, as socketify.py's does: the worker that
runs the handler asks the master (its parent) to stop gracefully, so the answer being
written, and every other one in flight, is finished first.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from socketify.app import Server
from socketify.core.coroutines import is_async
from socketify.core.request import Request
from socketify.core.response import Response
from socketify.core.tls_options import TlsOptions
from socketify.socketify_py.behaviors import ws_route
from socketify.socketify_py.chain import RouteTable
from socketify.socketify_py.errors import unsupported
from socketify.socketify_py.extensions import Extension, Faces, extend
from socketify.socketify_py.handlers import RouteHandler, WebSocketRoute
from socketify.socketify_py.loop import Loop
from socketify.socketify_py.request import AppRequest
from socketify.socketify_py.response import AppResponse, JsonSerializer
from socketify.socketify_py.websocket import OpCode, publish

__all__ = ["App", "AppListenOptions", "AppOptions"]

log = logging.getLogger("socketify.socketify_py")

Handler = Callable[[AppResponse, AppRequest], Any]
# socketify.py calls it with None for res and req when a lifespan hook failed.
ErrorHandler = Callable[[Exception, AppResponse | None, AppRequest | None], Any]


@dataclass(frozen=True)
class AppOptions:
    """socketify.py's TLS options: `App(AppOptions(key_file_name=..., cert_file_name=...))`."""

    key_file_name: str | None = None
    cert_file_name: str | None = None
    passphrase: str | None = None
    dh_params_file_name: str | None = None
    ca_file_name: str | None = None
    ssl_ciphers: str | None = None
    ssl_prefer_low_memory_usage: int = 0

    def tls_options(self) -> TlsOptions:
        """The Socketify `TlsOptions` these stand for."""
        if not self.key_file_name or not self.cert_file_name:
            raise ValueError("AppOptions needs both key_file_name and cert_file_name for HTTPS")
        if self.dh_params_file_name is not None:
            raise unsupported(
                "AppOptions(dh_params_file_name=...)", "TLS 1.2+ uses ECDHE; drop the option"
            )
        return TlsOptions(
            cert_file=self.cert_file_name,
            key_file=self.key_file_name,
            ca_file=self.ca_file_name,
            client_auth="optional" if self.ca_file_name else "none",
            ciphers=self.ssl_ciphers,
            key_password=self.passphrase,
        )


@dataclass(frozen=True)
class AppListenOptions:
    """Where to listen: `port` (0 picks a free one) and `host` (None: every interface), or
    `domain`, the path of a Unix socket."""

    port: int = 0
    host: str | None = None
    options: int = 0
    domain: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.port, int) or isinstance(self.port, bool):
            raise TypeError("AppListenOptions.port must be an int")
        if self.host is not None and not isinstance(self.host, str):
            raise TypeError("AppListenOptions.host must be a str or None")
        if self.domain is not None and not isinstance(self.domain, str):
            raise TypeError("AppListenOptions.domain must be a str or None")
        if self.domain and (self.host or self.port):
            raise ValueError("AppListenOptions: a domain (Unix socket) takes no host or port")


ListenHandler = Callable[[AppListenOptions], Any]


class App(Server):
    """socketify.py's App on Socketify: `App()`, routes, `ws`, `listen`, `run`.

    `options` (AppOptions) turns HTTPS on; Socketify's own Server options (`workers=`,
    `idle_timeout=`...) may be given as keywords.
    """

    def __init__(
        self,
        options: AppOptions | None = None,
        request_response_factory_max_items: int = 0,
        websocket_factory_max_items: int = 0,
        task_factory_max_items: int = 100_000,
        lifespan: bool = True,
        **server_options: Any,
    ) -> None:
        # The factory sizes tune socketify.py's object pools; Socketify has none to size.
        if options is not None:
            server_options.setdefault("tls", options.tls_options())
        super().__init__(**server_options)
        # `app.router` is the route table, and also socketify.py's `app.router(prefix, ...)`.
        self.router = RouteTable(self)
        self.app_options = options
        self._listen_at: list[tuple[AppListenOptions, ListenHandler | None]] = []
        self._topics: Any = None  # the Pulse Hub of ws topics, made by the first ws() or publish
        self.serializer: JsonSerializer = json
        self.template_engine: Any = None
        self.loop = Loop()
        self._master_pid: int | None = None  # set by run(): the process that supervises
        self.faces = Faces()  # the classes of the faces, with the registered extensions
        self._lifespan = lifespan
        self._start_hook: Callable[[], Any] | None = None
        self._shutdown_hook: Callable[[], Any] | None = None
        self._error_callback: ErrorHandler | None = None

    # -- extensions and the lifespan ------------------------------------------------------

    def register(self, extension: Extension) -> None:
        """Add `extension(request, response, ws)`'s methods and properties to the faces."""
        self.router.check_open()
        self.faces = extend(self.faces, extension)

    def on_start(self, hook: Callable[[], Any]) -> Callable[[], Any]:
        """Run `hook()` (plain or `async def`) in `run()`, before the workers start."""
        self._start_hook = hook
        return hook

    def on_shutdown(self, hook: Callable[[], Any]) -> Callable[[], Any]:
        """Run `hook()` (plain or `async def`) in `run()`, once the workers have stopped."""
        self._shutdown_hook = hook
        return hook

    def run_hook(self, hook: Callable[[], Any] | None) -> None:
        """Run a lifespan hook; what it raises goes to the error handler, as in socketify.py."""
        if hook is None or not self._lifespan:
            return
        try:
            result = hook()
            if inspect.isawaitable(result):
                asyncio.run(_awaited(result))
        except Exception as error:
            log.exception("the %s hook failed", getattr(hook, "__name__", "lifespan"))
            handler = self._error_callback
            if handler is not None:
                try:
                    handler(error, None, None)
                except Exception:
                    log.exception("the error handler failed on a lifespan hook's error")

    # -- routes ----------------------------------------------------------------------------

    def route_with(self, method: str, path: str, handler: Handler) -> App:
        """Register `handler(res, req)` for `method` on `path` (uWebSockets' pattern syntax)."""
        served = RouteHandler(self, handler)
        served.route = self.router.add(method, path, served)
        return self

    def get(self, path: str, handler: Handler) -> App:  # type: ignore[override]
        """`handler(res, req)` for GET (and HEAD) requests to `path`."""
        return self.route_with("GET", path, handler)

    def post(self, path: str, handler: Handler) -> App:  # type: ignore[override]
        """`handler(res, req)` for POST."""
        return self.route_with("POST", path, handler)

    def put(self, path: str, handler: Handler) -> App:  # type: ignore[override]
        """`handler(res, req)` for PUT."""
        return self.route_with("PUT", path, handler)

    def patch(self, path: str, handler: Handler) -> App:  # type: ignore[override]
        """`handler(res, req)` for PATCH."""
        return self.route_with("PATCH", path, handler)

    def delete(self, path: str, handler: Handler) -> App:  # type: ignore[override]
        """`handler(res, req)` for DELETE."""
        return self.route_with("DELETE", path, handler)

    def options(self, path: str, handler: Handler) -> App:  # type: ignore[override]
        """`handler(res, req)` for OPTIONS."""
        return self.route_with("OPTIONS", path, handler)

    def head(self, path: str, handler: Handler) -> App:  # type: ignore[override]
        """`handler(res, req)` for HEAD."""
        return self.route_with("HEAD", path, handler)

    def connect(self, path: str, handler: Handler) -> App:
        """`handler(res, req)` for CONNECT."""
        return self.route_with("CONNECT", path, handler)

    def trace(self, path: str, handler: Handler) -> App:
        """`handler(res, req)` for TRACE."""
        return self.route_with("TRACE", path, handler)

    def any(self, path: str, handler: Handler) -> App:  # type: ignore[override]
        """`handler(res, req)` for every method."""
        return self.route_with("ANY", path, handler)

    def set_error_handler(self, handler: ErrorHandler) -> None:
        """`handler(error, res, req)` answers what a handler raised (socketify.py's order)."""
        self._error_callback = handler
        if is_async(handler):

            async def on_error_async(req: Request, res: Response, exc: Exception) -> Any:
                return await handler(
                    exc, self.faces.response(res, req, self), self.faces.request(req)
                )

            super().on_error(on_error_async)
        else:

            def on_error(req: Request, res: Response, exc: Exception) -> Any:
                return handler(exc, self.faces.response(res, req, self), self.faces.request(req))

            super().on_error(on_error)

    def on_error(self, handler: ErrorHandler) -> ErrorHandler:  # type: ignore[override]
        """`set_error_handler`, usable as a decorator: `@app.on_error`."""
        self.set_error_handler(handler)
        return handler

    def json_serializer(self, serializer: JsonSerializer) -> App:
        """Encode and decode JSON bodies and messages with `serializer` (`ujson`, `orjson`...)."""
        if not callable(getattr(serializer, "dumps", None)) or not callable(
            getattr(serializer, "loads", None)
        ):
            raise TypeError("a JSON serializer needs dumps() and loads()")
        self.serializer = serializer
        return self

    def template(self, engine: Any) -> App:
        """Render `res.render(...)` with `engine.render(...)` (socketify.py's template plug-in)."""
        if not callable(getattr(engine, "render", None)):
            raise TypeError("a template engine needs a render() method")
        self.template_engine = engine
        return self

    # -- WebSockets and topics -------------------------------------------------------------

    def ws(self, path: str, behavior: dict[str, Any] | None = None, **ignored: Any) -> App:  # type: ignore[override]
        """A WebSocket route from a socketify.py behavior dict (`open`, `message`, ...)."""
        if ignored:
            raise TypeError("app.ws(path, behavior): pass the behavior as one dict")
        served = WebSocketRoute(self, ws_route(behavior or {}, self))
        served.route = self.router.add("GET", path, served)
        return self

    def hub(self) -> Any:
        """The Pulse Hub whose rooms are this App's topics (shared by every worker)."""
        if self._topics is None:
            from socketify.realtime.pulse.hub import Hub

            self._topics = Hub(name="socketify_py")
        return self._topics

    def publish(
        self, topic: str | bytes, message: Any, opcode: int = OpCode.BINARY, compress: bool = False
    ) -> bool:
        """Send `message` to every subscriber of `topic`, on every worker."""
        publish(self.hub(), topic, message, opcode, self.serializer)
        return True

    def num_subscribers(self, topic: str | bytes) -> int:
        """How many connections, on every worker, are subscribed to `topic`."""
        name = topic.decode("utf-8") if isinstance(topic, bytes) else topic
        return int(self.hub().room_size(name))

    # -- listening -------------------------------------------------------------------------

    def listen(  # type: ignore[override]
        self,
        port_or_options: int | AppListenOptions | dict[str, Any] | None = None,
        handler: ListenHandler | None = None,
    ) -> App:
        """Record where `run()` listens; `handler(config)` is called once it does."""
        if port_or_options is None:
            where = AppListenOptions()
        elif isinstance(port_or_options, AppListenOptions):
            where = port_or_options
        elif isinstance(port_or_options, dict):
            where = AppListenOptions(
                port=port_or_options.get("port", 0),
                host=port_or_options.get("host"),
                domain=port_or_options.get("domain"),
            )
        elif isinstance(port_or_options, int) and not isinstance(port_or_options, bool):
            where = AppListenOptions(port=port_or_options)
        else:
            raise TypeError("listen() takes a port, an AppListenOptions or a dict")
        self._listen_at.append((where, handler))
        return self

    def run(self) -> App:
        """Serve until SIGINT/SIGTERM: the pre-fork master, with the recorded `listen()`s.

        Under `socketify run`, which imports this module to find the app, it returns at
        once: the command line's `--bind` decides where the app is served.
        """
        from socketify.server.app_worker import importing_app

        if importing_app():
            log.info("socketify run serves this App; app.run() in the module returns at once")
            return self
        if not self._listen_at:
            raise RuntimeError("call app.listen(port, handler) before app.run()")
        binds = [_bind_text(where) for where, _ in self._listen_at]
        self._master_pid = os.getpid()
        self.run_hook(self._start_hook)
        Server.listen(self, binds=binds)
        for where, handler in self._listen_at:
            if handler is not None:
                # A port 0 is reported resolved (the first TCP bind's port).
                handler(where if where.domain or where.port else replace(where, port=self.port))
        self.wait()
        self.run_hook(self._shutdown_hook)
        return self

    def close(self) -> App:
        """Stop the server gracefully: what is in flight (this answer too) is finished first.

        From a handler, in a worker, this asks the master to stop; in the process that
        called `run()` (another thread, a signal handler) it stops the server directly.
        """
        if self._master_pid == os.getpid():
            self.stop()
            return self
        master = os.getppid()
        if master > 1:  # 1: the master is gone and this worker was re-parented
            os.kill(master, signal.SIGTERM)
        return self

    # -- the worker's event loop ---------------------------------------------------------

    def run_async(self, coroutine: Any, response: AppResponse | None = None) -> Any:
        """Run `coroutine` on the worker's event loop (see `Loop.run_async`)."""
        return self.loop.run_async(coroutine, response)

    # -- socketify.py calls without a counterpart -----------------------------------------

    def static(self, route: str, directory: str) -> App:
        """Serve the files of `directory` under `route` (Socketify's static_files)."""
        from socketify.middleware import static_files

        self.use(static_files.serve(directory, route.rstrip("/") or "/"))
        return self

    def domain(self, *args: Any, **kwargs: Any) -> Any:
        """Not supported."""
        raise unsupported("app.domain", "route by host with app.host(pattern)")

    def add_server_name(self, *args: Any, **kwargs: Any) -> Any:
        """Not supported."""
        raise unsupported("app.add_server_name", "give TlsOptions(sni={host: (cert, key)})")

    def missing_server_name(self, *args: Any, **kwargs: Any) -> Any:
        """Not supported."""
        raise unsupported("app.missing_server_name", "give TlsOptions(sni={host: (cert, key)})")

    def remove_server_name(self, *args: Any, **kwargs: Any) -> Any:
        """Not supported."""
        raise unsupported("app.remove_server_name", "give TlsOptions(sni={host: (cert, key)})")

    def get_native_handle(self, *args: Any, **kwargs: Any) -> Any:
        """Not supported."""
        raise unsupported("app.get_native_handle", "there is no uWebSockets app underneath")


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _bind_text(where: AppListenOptions) -> str:
    if where.domain:
        return f"unix:{where.domain}"
    host = where.host or "0.0.0.0"
    return f"[{host}]:{where.port}" if ":" in host else f"{host}:{where.port}"
