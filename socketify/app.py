"""`Server`: the application users build — the core `Application`, plus serving and WebSockets.

    server = Server(workers=4)
    server.get("/", index)
    server.ws("/chat", message=on_message)
    server.listen(8080)   # master: pre-forks workers, returns once they serve
    server.wait()

This class sits above the layers it joins: routing, middleware and `handle()` come from
`socketify.core.application.Application` (no IO); `ws()` builds a Pulse route
(`socketify.realtime.pulse.routes`); `mount()` serves a WSGI app under a prefix
(`socketify.wsgi`); `listen()` reaches the IO layer through its one entry
point, `socketify.server.launch.launch`. Both are imported when first called, so that
`import socketify` stays small and never imports gevent.
"""

from __future__ import annotations

from typing import Any

from socketify.core.application import Application
from socketify.core.routing import Route

__all__ = ["Server"]


class Server(Application):
    """A Socketify application: `Server(**options)`, then routes, middleware and `listen()`."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._runner: Any = None

    def ws(self, path: str, **behaviour: Any) -> Route:
        """A WebSocket route, uWebSockets style: `open=, message=, close=, drain=`, limits.

        See `socketify.realtime.pulse.routes.ws_handler` for the options.
        """
        from socketify.realtime.pulse.routes import ws_handler

        return self.get(path, ws_handler(**behaviour))

    def mount(self, prefix: str, app: Any, *, root_path: str = "") -> Route:
        """Serve the WSGI `app` (Flask, Django...) for every method under `prefix`.

        The app sees SCRIPT_NAME `root_path + prefix` and the rest of the path as
        PATH_INFO. This server's middleware runs first, and its own routes under `prefix`
        win over the mount, so a project can move to Socketify one route at a time.
        Returns the route (`.use(mw)` adds middleware for the mounted app only).
        """
        from socketify.wsgi import WsgiHandler

        trimmed = prefix.strip("/")
        base = f"/{trimmed}" if trimmed else ""
        return self.any(f"{base}/*wsgi_path", WsgiHandler(app, base, root_path))

    def listen(
        self, port: int = 8080, host: str = "0.0.0.0", *, binds: list[str] | None = None
    ) -> Server:
        """Start serving on `host:port` (or every `binds` entry); returns once workers serve."""
        from socketify.server.launch import launch

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
