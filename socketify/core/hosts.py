"""Per-host routers: `server.host("api.example.com")` gets routes and middleware of its own.

A request goes to the router of the host it named: the TLS SNI name when the client sent one,
else the Host header (`:authority` in HTTP/2), without its port, case-insensitively. An exact
name wins over a wildcard; `*.example.com` matches one label (`api.example.com`, not
`example.com` nor `a.b.example.com`), as a wildcard certificate does, and the longest
wildcard wins. A request whose host matches no router goes to the server's own routes.
The server's global middleware runs first for every request; then the host router's own
middleware, route lookup (404/405 within that host) and route chains, frozen at start-up.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from socketify.core.chain import Chain
from socketify.core.coroutines import blocking_middleware
from socketify.core.routing import Group, Middleware, Registrar, Route, Router

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = ["HostRouter", "HostTable", "request_host"]

_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_NAME = re.compile(rf"(\*\.)?{_LABEL}(\.{_LABEL})*")

Dispatch = Callable[["Router", "Request", "Response"], None]


class HostRouter(Registrar):
    """Routes and middleware that answer the requests for one host name (or wildcard)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.router = Router()
        self.middleware: list[Middleware] = []
        self.chain: Chain | None = None  # made by `freeze`

    def use(self, middleware: Middleware) -> HostRouter:
        """Add a middleware `(req, res, next)` for every request to this host."""
        self.router.check_open()
        self.middleware.append(blocking_middleware(middleware, "middleware"))
        return self

    def _add(self, method: str, pattern: str, handler: Callable[..., Any]) -> Route:
        return self.router.add(method, pattern, handler)

    def group(self, prefix: str) -> Group:
        """Create a route group of this host; its `.use()` covers the routes under `prefix`."""
        return self.router.add_group(prefix)

    def freeze(self, dispatch: Dispatch) -> None:
        """Resolve the routes and the chain: middleware, then `dispatch(router, req, res)`."""
        if self.chain is not None:
            return
        self.router.freeze()
        router = self.router

        def answer(req: Request, res: Response) -> None:
            dispatch(router, req, res)

        self.chain = Chain(self.middleware, answer)

    def __repr__(self) -> str:
        return f"HostRouter({self.pattern!r})"


class HostTable:
    """The host routers of a server, looked up by name: exact names, then wildcards."""

    def __init__(self) -> None:
        self.exact: dict[str, HostRouter] = {}
        self.wildcards: dict[str, HostRouter] = {}  # ".example.com" -> router of *.example.com

    def __bool__(self) -> bool:
        return bool(self.exact or self.wildcards)

    def add(self, pattern: str) -> HostRouter:
        """The router for `pattern` (the same one when asked twice); ValueError if malformed."""
        name = pattern.strip().lower().rstrip(".")
        if not _NAME.fullmatch(name):
            raise ValueError(
                f"host {pattern!r} is not a host name or a *.name wildcard (e.g. *.example.com)"
            )
        if name.startswith("*."):
            table, key = self.wildcards, name[1:]
        else:
            table, key = self.exact, name
        router = table.get(key)
        if router is None:
            router = table[key] = HostRouter(name)
        return router

    def freeze(self, dispatch: Dispatch) -> None:
        """Freeze every host router."""
        for router in (*self.exact.values(), *self.wildcards.values()):
            router.freeze(dispatch)

    def match(self, name: str) -> HostRouter | None:
        """The router for the host `name` (lower-case, no port), or None."""
        router = self.exact.get(name)
        if router is not None:
            return router
        _, dot, parent = name.partition(".")
        if dot:
            return self.wildcards.get("." + parent)
        return None


def request_host(req: Request) -> str:
    """The host a request named: its SNI name, else its Host header without the port."""
    name = req.server_name
    if name:
        return name.lower().rstrip(".")
    host = req.header("host")
    if host.startswith("["):  # an IPv6 literal never names a host router
        return ""
    return host.partition(":")[0].lower().rstrip(".")
