"""The router: patterns, precedence, groups and per-route middleware.

Theory of operation. A pattern is split on "/" (empty segments ignored) into static segments,
`:name`/`{name}` parameters (one segment) and a final `*name` wildcard (the rest, maybe "").
A request path is split the same way and then each segment is percent-decoded, so `%2F` stays
inside its segment. Among the routes whose pattern matches, a static segment beats a parameter
beats a wildcard, position by position from the left; ties go to registration order; the first
of those whose method fits (equal, ANY, or GET for a HEAD request) wins.

`freeze()` resolves everything once (falcon's prepare_middleware idea): it builds a segment
trie for the general case, a dict from each fully static path to a {method: route} table for
the common case, and each route's complete chain (group middleware, route middleware,
handler). The hot path for a static route is then two dict lookups on the raw path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, overload
from urllib.parse import unquote

from mypy_extensions import mypyc_attr

from socketify.core.chain import Chain, Middleware
from socketify.core.coroutines import blocking, blocking_middleware
from socketify.core.errors import HTTPError

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = [
    "ANY",
    "Group",
    "Handler",
    "Middleware",
    "Route",
    "Router",
    "allow_header",
    "decode_path",
    "split_path",
]

Handler = Callable[["Request", "Response"], Any]
H = TypeVar("H", bound=Callable[..., Any])

ANY = "*"
# The order methods are listed in an Allow header.
_ALLOW_ORDER = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "CONNECT", "TRACE")
_METHOD = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
MALFORMED_PATH = "Malformed percent-encoding in path"
MATCHES_KEPT = 2048  # parametrised paths whose match the router remembers (see Router)
MATCH_PATH_MAX = 256  # longer paths are matched every time (the memory stays under ~1 MiB)


def split_path(raw_path: str) -> list[str]:
    """Split a raw (encoded) path into decoded segments; bad escapes or NUL → HTTPError(400)."""
    segments = [s for s in raw_path.split("/") if s]
    if "\x00" in raw_path:  # the parser refuses it; a hand-built request may not have
        raise HTTPError(400, MALFORMED_PATH)
    if "%" in raw_path:
        if _BAD_ESCAPE.search(raw_path):
            raise HTTPError(400, MALFORMED_PATH)
        segments = [unquote(s) if "%" in s else s for s in segments]
        for segment in segments:
            if "\x00" in segment:
                raise HTTPError(400, MALFORMED_PATH)
    return segments


def decode_path(raw_path: str) -> str:
    """Return the path percent-decoded for display; a malformed path is returned as sent."""
    if "%" not in raw_path:
        return raw_path
    if _BAD_ESCAPE.search(raw_path):
        return raw_path
    decoded = unquote(raw_path)
    # A NUL would reach open() or a log line; routing answers 400 for it anyway.
    return raw_path if "\x00" in decoded else decoded


def allow_header(methods: list[str] | tuple[str, ...], *, with_options: bool = False) -> str:
    """Format an Allow value: the order above, others after, HEAD added when only GET is there."""
    present = set(methods)
    if with_options:
        present.add("OPTIONS")
    ordered = [m for m in _ALLOW_ORDER if m in present]
    ordered += sorted(present.difference(_ALLOW_ORDER))
    if "GET" in present and "HEAD" not in present:
        ordered.append("HEAD")
    return ", ".join(ordered)


class Route:
    """One registered (method, pattern, handler); `.use(mw)` adds per-route middleware."""

    __slots__ = (
        "_router",
        "chain",
        "handler",
        "method",
        "middleware",
        "params",
        "pattern",
        "segments",
        "wildcard",
    )

    def __init__(self, router: Router, method: str, pattern: str, handler: Handler) -> None:
        self._router = router
        self.method = method
        self.pattern = pattern
        self.handler = handler
        self.middleware: list[Middleware] = []
        self.chain = Chain((), handler)  # group and route middleware join it at freeze
        # Compiled form: segments are ("s", text), ("p", name) or ("w", name).
        self.segments: list[tuple[str, str]] = []
        params: list[tuple[str, int]] = []
        self.wildcard: tuple[str, int] | None = None
        for index, text in enumerate(s for s in pattern.split("/") if s):
            if text[0] == "*":
                self.wildcard = (text[1:] or "*", index)
                self.segments.append(("w", self.wildcard[0]))
                break  # segments after a wildcard are discarded
            if text[0] == ":" or (text[0] == "{" and text[-1] == "}" and len(text) > 1):
                name = text[1:] if text[0] == ":" else text[1:-1]
                if not name:
                    raise ValueError(f"empty parameter name in pattern {pattern!r}")
                params.append((name, index))
                self.segments.append(("p", name))
            else:
                self.segments.append(("s", text))
        names = [n for n, _ in params] + ([self.wildcard[0]] if self.wildcard else [])
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate parameter name in pattern {pattern!r}")
        self.params = tuple(params)

    @property
    def is_static(self) -> bool:
        """True when the pattern has no parameter and no wildcard."""
        return not self.params and self.wildcard is None

    def use(self, middleware: Middleware) -> Route:
        """Add a middleware that runs for this route only (after group middleware)."""
        self._router.check_open()
        self.middleware.append(blocking_middleware(middleware, "middleware"))
        return self

    def matches_method(self, method: str) -> bool:
        """True if this route answers `method` (HEAD falls back to GET)."""
        mine = self.method
        return mine in (method, ANY) or (method == "HEAD" and mine == "GET")

    def extract(self, segments: list[str]) -> dict[str, str]:
        """Build the params dict for a matching path's decoded segments."""
        params = {name: segments[index] for name, index in self.params}
        if self.wildcard is not None:
            name, index = self.wildcard
            params[name] = "/".join(segments[index:])
        return params

    def __repr__(self) -> str:
        return f"Route({self.method} {self.pattern!r})"


class _Node:
    """A trie level: static children, one shared parameter child, routes ending here."""

    __slots__ = ("ending", "ending_by_method", "param", "static", "wild", "wild_by_method")

    def __init__(self) -> None:
        self.static: dict[str, _Node] = {}
        self.param: _Node | None = None
        self.ending: list[Route] = []  # patterns that end at this depth
        self.wild: list[Route] = []  # patterns with a wildcard at this depth
        # Filled by freeze(): method -> the route that answers it (see _method_table).
        self.ending_by_method: dict[str, Route] = {}
        self.wild_by_method: dict[str, Route] = {}

    def prepare(self) -> None:
        """Precompute the method tables of this node and its children."""
        self.ending_by_method = _method_table(self.ending)
        self.wild_by_method = _method_table(self.wild)
        for child in self.static.values():
            child.prepare()
        if self.param is not None:
            self.param.prepare()


def _method_table(routes: list[Route]) -> dict[str, Route]:
    """Map each method to the first route (registration order) answering it.

    The ANY key holds the first ANY route, for methods no route names: look up with
    `table.get(method) or table.get(ANY)`. For a listed method the first lookup already
    accounts for ANY routes, so the fallback only fires when nothing could answer anyway.
    """
    table: dict[str, Route] = {}
    methods = dict.fromkeys([*_ALLOW_ORDER, *(r.method for r in routes)])
    for method in methods:
        for route in routes:
            if route.matches_method(method):
                table[method] = route
                break
    return table


def _search(node: _Node, segments: list[str], depth: int, method: str) -> Route | None:
    """Return the most specific route matching `segments` that answers `method`."""
    if depth == len(segments):
        table = node.ending_by_method
        route = table.get(method) or table.get(ANY)
        if route is None:
            table = node.wild_by_method  # a wildcard also matches an empty rest
            route = table.get(method) or table.get(ANY)
        return route
    child = node.static.get(segments[depth])
    if child is not None:
        route = _search(child, segments, depth + 1, method)
        if route is not None:
            return route
    if node.param is not None:
        route = _search(node.param, segments, depth + 1, method)
        if route is not None:
            return route
    table = node.wild_by_method
    return (table.get(method) or table.get(ANY)) if table else None


def _walk(node: _Node, segments: list[str], depth: int) -> Iterator[Route]:
    """Yield every route matching `segments` in precedence order (for Allow lists)."""
    if depth == len(segments):
        yield from node.ending
        yield from node.wild  # a wildcard also matches an empty rest
        return
    child = node.static.get(segments[depth])
    if child is not None:
        yield from _walk(child, segments, depth + 1)
    if node.param is not None:
        yield from _walk(node.param, segments, depth + 1)
    yield from node.wild


# Its subclass `Application` is subclassed by apps, which mypyc allows only down a line
# of classes that all allow it.
@mypyc_attr(allow_interpreted_subclasses=True)
class Registrar:
    """Route shorthands shared by Server and Group; subclasses implement `_add`.

    Each verb registers `handler` for `pattern`; without a handler it returns a decorator.
    """

    @overload
    def get(self, pattern: str) -> Callable[[H], H]: ...
    @overload
    def get(self, pattern: str, handler: Handler) -> Route: ...
    def get(self, pattern: str, handler: Handler | None = None) -> Any:
        """Register a GET route; without a handler, return a decorator."""
        return self.route("GET", pattern, handler)

    @overload
    def post(self, pattern: str) -> Callable[[H], H]: ...
    @overload
    def post(self, pattern: str, handler: Handler) -> Route: ...
    def post(self, pattern: str, handler: Handler | None = None) -> Any:
        """Register a POST route; without a handler, return a decorator."""
        return self.route("POST", pattern, handler)

    @overload
    def put(self, pattern: str) -> Callable[[H], H]: ...
    @overload
    def put(self, pattern: str, handler: Handler) -> Route: ...
    def put(self, pattern: str, handler: Handler | None = None) -> Any:
        """Register a PUT route; without a handler, return a decorator."""
        return self.route("PUT", pattern, handler)

    @overload
    def patch(self, pattern: str) -> Callable[[H], H]: ...
    @overload
    def patch(self, pattern: str, handler: Handler) -> Route: ...
    def patch(self, pattern: str, handler: Handler | None = None) -> Any:
        """Register a PATCH route; without a handler, return a decorator."""
        return self.route("PATCH", pattern, handler)

    @overload
    def delete(self, pattern: str) -> Callable[[H], H]: ...
    @overload
    def delete(self, pattern: str, handler: Handler) -> Route: ...
    def delete(self, pattern: str, handler: Handler | None = None) -> Any:
        """Register a DELETE route; without a handler, return a decorator."""
        return self.route("DELETE", pattern, handler)

    @overload
    def options(self, pattern: str) -> Callable[[H], H]: ...
    @overload
    def options(self, pattern: str, handler: Handler) -> Route: ...
    def options(self, pattern: str, handler: Handler | None = None) -> Any:
        """Register a OPTIONS route; without a handler, return a decorator."""
        return self.route("OPTIONS", pattern, handler)

    @overload
    def head(self, pattern: str) -> Callable[[H], H]: ...
    @overload
    def head(self, pattern: str, handler: Handler) -> Route: ...
    def head(self, pattern: str, handler: Handler | None = None) -> Any:
        """Register a HEAD route; without a handler, return a decorator."""
        return self.route("HEAD", pattern, handler)

    @overload
    def any(self, pattern: str) -> Callable[[H], H]: ...
    @overload
    def any(self, pattern: str, handler: Handler) -> Route: ...
    def any(self, pattern: str, handler: Handler | None = None) -> Any:
        """Register a route for every method that has no route of its own at `pattern`."""
        return self.route(ANY, pattern, handler)

    @overload
    def route(self, method: str, pattern: str, handler: None = None) -> Callable[[H], H]: ...
    @overload
    def route(self, method: str, pattern: str, handler: Handler) -> Route: ...
    def route(self, method: str, pattern: str, handler: Handler | None = None) -> Any:
        """Register `handler` for `method` ("ANY" for all); without one, return a decorator."""
        if handler is None:

            def decorator(fn: H) -> H:
                self._add(method, pattern, fn)
                return fn

            return decorator
        return self._add(method, pattern, handler)

    def _add(self, method: str, pattern: str, handler: Handler) -> Route:
        raise NotImplementedError

    def group(self, prefix: str) -> Group:
        """Create a group of routes under `prefix` (nested under this one's, if any)."""
        raise NotImplementedError


def _join(prefix: str, pattern: str) -> str:
    return "/" + "/".join(s for s in (prefix + "/" + pattern).split("/") if s)


class Group(Registrar):
    """Routes under a prefix; its middleware applies to every route under that prefix."""

    __slots__ = ("_router", "middleware", "prefix")

    def __init__(self, router: Router, prefix: str) -> None:
        self._router = router
        self.prefix = _join(prefix, "")
        self.middleware: list[Middleware] = []

    def use(self, middleware: Middleware) -> Group:
        """Add a middleware for every route under this group's prefix."""
        self._router.check_open()
        self.middleware.append(blocking_middleware(middleware, "middleware"))
        return self

    def _add(self, method: str, pattern: str, handler: Handler) -> Route:
        return self._router.add(method, _join(self.prefix, pattern), handler)

    def group(self, prefix: str) -> Group:
        """Create a nested group; its middleware runs after this group's."""
        return self._router.add_group(_join(self.prefix, prefix))

    def __repr__(self) -> str:
        return f"Group({self.prefix!r})"


def _no_handler(req: Request, res: Response) -> None:
    """Placeholder handler for compiling group prefixes as patterns."""


def _shape(segments: list[tuple[str, str]]) -> list[str]:
    # Parameters compare equal whatever their names: group "/u/:id" covers "/u/{uid}/x".
    return [text if kind == "s" else kind for kind, text in segments]


# socketify.py's `RouteTable` subclasses it; compiled, that must be allowed by name.
@mypyc_attr(allow_interpreted_subclasses=True)
class Router:
    """The route table; mutable until `freeze()`, then read-only and fast."""

    __slots__ = ("_frozen", "_groups", "_matches", "_root", "_routes", "static_paths")

    def __init__(self) -> None:
        self._routes: list[Route] = []
        self._groups: list[Group] = []
        self._root = _Node()
        # Filled by freeze(): raw path -> method table (see _method_table) of each static
        # pattern. Read-only for callers; Server's dispatch looks here before calling find().
        self.static_paths: dict[str, dict[str, Route]] = {}
        # PERF: (method, raw path) -> (route, params) of parametrised paths found in the trie
        # (`/users/1` asked again and again), so a repeat costs a lookup and a dict copy.
        # Bounded: emptied when full, and only short paths are kept, so paths a client
        # invents cost little memory.
        self._matches: dict[tuple[str, str], tuple[Route, dict[str, str]]] = {}
        self._frozen = False

    @property
    def routes(self) -> list[Route]:
        """The registered routes in registration order."""
        return list(self._routes)

    @property
    def frozen(self) -> bool:
        """True once `freeze()` ran; registration is then refused."""
        return self._frozen

    def methods(self) -> tuple[str, ...]:
        """Every method some route answers (ANY counts as all the common ones)."""
        found = dict.fromkeys(r.method for r in self._routes)
        if ANY in found:
            del found[ANY]
            found.update(dict.fromkeys(_ALLOW_ORDER[:7]))  # GET … HEAD, not CONNECT/TRACE
        return tuple(found)

    def check_open(self) -> None:
        """Raise RuntimeError when the table is frozen."""
        if self._frozen:
            raise RuntimeError("routes and middleware must be registered before the server starts")

    def add(self, method: str, pattern: str, handler: Handler) -> Route:
        """Register a route and return it."""
        self.check_open()
        handler = blocking(handler, f"the handler for {pattern!r}")
        upper = method.upper()
        if upper in ("ANY", ANY):
            method = ANY
        elif _METHOD.fullmatch(method):
            method = upper  # registration is forgiving; the wire is case-sensitive
        else:
            raise ValueError(f"invalid method {method!r}")
        route = Route(self, method, pattern, handler)
        self._routes.append(route)
        return route

    def add_group(self, prefix: str) -> Group:
        """Create a group; groups apply in creation order."""
        self.check_open()
        group = Group(self, prefix)
        self._groups.append(group)
        return group

    def freeze(self) -> None:
        """Build the trie, the static table and every route's middleware chain."""
        if self._frozen:
            return
        static: dict[str, list[Route]] = {}
        groups = [
            (_shape(Route(self, ANY, g.prefix, _no_handler).segments), g.middleware)
            for g in self._groups
        ]
        for route in self._routes:
            shape = _shape(route.segments)
            chain: list[Middleware] = []
            for prefix, middleware in groups:
                # Compare whole segments: "/api" covers "/api/x" but not "/apiv2/x".
                if shape[: len(prefix)] == prefix:
                    chain.extend(middleware)
            chain.extend(route.middleware)
            route.chain = Chain(chain, route.handler)
            self._insert(route)
            if route.is_static:
                static.setdefault("/" + "/".join(t for _, t in route.segments), []).append(route)
        for path, routes in static.items():
            if "%" not in path:  # a raw path with "%" must be decoded first: trie only
                self.static_paths[path] = _method_table(routes)
        self._root.prepare()
        self._frozen = True

    def _insert(self, route: Route) -> None:
        node = self._root
        for kind, text in route.segments:
            if kind == "s":
                node = node.static.setdefault(text, _Node())
            elif kind == "p":
                if node.param is None:
                    node.param = _Node()
                node = node.param
            else:
                node.wild.append(route)
                return
        node.ending.append(route)

    def find(
        self, method: str, raw_path: str
    ) -> tuple[Route | None, dict[str, str] | None, tuple[str, ...] | None]:
        """Resolve a request: (route, params, None), (None, None, allowed methods) or all None.

        Raises HTTPError(400) for a malformed percent-encoded path.
        """
        table = self.static_paths.get(raw_path)
        if table is not None:
            route = table.get(method) or table.get(ANY)
            if route is not None:
                return route, None, None
        key = (method, raw_path)
        matched = self._matches.get(key)
        if matched is not None:
            return matched[0], dict(matched[1]), None  # a copy: handlers may change params
        segments = split_path(raw_path)
        route = _search(self._root, segments, 0, method)
        if route is not None:
            if not (route.params or route.wildcard):
                return route, None, None
            params = route.extract(segments)
            if self._frozen and len(raw_path) <= MATCH_PATH_MAX:
                if len(self._matches) >= MATCHES_KEPT:
                    self._matches.clear()
                self._matches[key] = (route, params)
                params = dict(params)
            return route, params, None
        # The slow part runs only for 404/405/OPTIONS: which methods would this path take?
        allowed = tuple(dict.fromkeys(r.method for r in _walk(self._root, segments, 0)))
        return None, None, (allowed or None)

    def candidates(self, method: str, raw_path: str) -> Iterator[tuple[Route, dict[str, str]]]:
        """Every route that answers `method` on `raw_path`, best first, with its params.

        What `find` returns is the first of these; the rest are what a handler that declines
        the request falls through to, in the same precedence.
        """
        segments = split_path(raw_path)
        for route in _walk(self._root, segments, 0):
            if route.matches_method(method):
                yield route, route.extract(segments)
