"""CORS middleware: origin decision, preflights, credentials, private network.

Theory of operation. Everything is resolved at creation: header values are joined once, the
origin rule becomes one function. Per request:

1. No `Origin` header: not a CORS request; only `Vary: Origin` is added when the answer
   depends on the origin (so a shared cache never serves one origin's answer to another).
2. The origin decision gives the `Access-Control-Allow-Origin` value or none:
   `reflect_origin` echoes an allowed origin; `*` without credentials answers `*`; `*` with
   credentials allows nothing (a wildcard must never carry cookies); a list (or one origin)
   matches case-insensitively and answers the configured spelling; a callable decides.
   The origin `null` is never echoed, whatever the rule: sandboxed iframes, `data:` and
   `file:` pages and some redirects all send it, so allowing it allows any site that wants
   to hide behind one of those. `*` with `reflect_origin` and credentials (echo every
   origin, cookies included) is refused at creation unless the loudly named opt-in
   `unsafe_reflect_any_origin_with_credentials` is given: it lets every website act with
   the user's session, which is what CORS exists to prevent.
3. A preflight (OPTIONS with `Access-Control-Request-Method`) gets the methods, headers,
   private-network and max-age headers and ends with 204 — unless `preflight_continue`, which
   passes it on. Other requests get `Access-Control-Expose-Headers` (when allowed) and go on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from socketify.core.chain import Hooked, hooked
from socketify.core.negotiation import add_vary

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = ["DEFAULT_METHODS", "middleware"]

DEFAULT_METHODS = "GET,POST,PUT,PATCH,DELETE,OPTIONS,HEAD"

OriginRule = str | Iterable[str] | Callable[[str], bool]


def middleware(
    allow_origin: OriginRule = "*",
    *,
    reflect_origin: bool = False,
    allow_methods: str | Iterable[str] = DEFAULT_METHODS,
    allow_headers: str | Iterable[str] = "",
    expose_headers: str | Iterable[str] = "",
    allow_credentials: bool = False,
    max_age_seconds: int = 600,
    allow_private_network: bool = False,
    preflight_continue: bool = False,
    unsafe_reflect_any_origin_with_credentials: bool = False,
) -> Hooked:
    """CORS for every request (empty methods or headers: echo what the preflight asks)."""
    if (
        reflect_origin
        and allow_credentials
        and _names_any_origin(allow_origin)
        and not unsafe_reflect_any_origin_with_credentials
    ):
        raise ValueError(
            "cors: reflect_origin=True with allow_credentials=True and allow_origin='*' would"
            " let every website make requests with your users' cookies and read the answers;"
            " list the origins you trust instead (or, if you really mean it, pass"
            " unsafe_reflect_any_origin_with_credentials=True)"
        )
    decide, varies = _origin_rule(allow_origin, reflect_origin, allow_credentials)
    methods = _joined(allow_methods)
    headers = _joined(allow_headers)
    exposed = _joined(expose_headers)
    max_age = str(int(max_age_seconds)) if max_age_seconds > 0 else ""

    def cors_middleware(req: Request, res: Response) -> bool:
        origin = req.header("origin")
        if not origin:
            if varies:
                add_vary(res, "Origin")
            return True
        if decide is _any_origin:
            allowed: str | None = "*"  # the same answer for every origin, never credentials
        elif origin == "null":
            allowed = None  # any page can send `null` (see the module doc)
        else:
            allowed = decide(origin)
        if allowed is not None:
            res.set_header("Access-Control-Allow-Origin", allowed)
            if allow_credentials:
                res.set_header("Access-Control-Allow-Credentials", "true")
        if varies:
            add_vary(res, "Origin")
        if req.method == "OPTIONS":
            requested_method = req.header("access-control-request-method")
            if requested_method:
                _preflight(req, res, requested_method)
                if preflight_continue:
                    return True
                res.send_status(204)
                return False
        if exposed and allowed is not None:
            res.set_header("Access-Control-Expose-Headers", exposed)
        return True

    def _preflight(req: Request, res: Response, requested_method: str) -> None:
        if methods:
            res.set_header("Access-Control-Allow-Methods", methods)
        else:
            res.set_header("Access-Control-Allow-Methods", requested_method)
            add_vary(res, "Access-Control-Request-Method")
        if headers:
            res.set_header("Access-Control-Allow-Headers", headers)
        else:
            requested = req.header("access-control-request-headers")
            if requested:
                res.set_header("Access-Control-Allow-Headers", requested)
            add_vary(res, "Access-Control-Request-Headers")
        if allow_private_network and req.header("access-control-request-private-network"):
            res.set_header("Access-Control-Allow-Private-Network", "true")
        if max_age:
            res.set_header("Access-Control-Max-Age", max_age)

    return hooked(cors_middleware)


def _any_origin(origin: str) -> str | None:
    return "*"


def _names_any_origin(rule: OriginRule) -> bool:
    if callable(rule):
        return False
    return "*" in ([rule] if isinstance(rule, str) else list(rule))


def _joined(value: str | Iterable[str]) -> str:
    if isinstance(value, str):
        return ",".join(part.strip() for part in value.split(",") if part.strip())
    return ",".join(str(part).strip() for part in value if str(part).strip())


def _origin_rule(
    rule: OriginRule, reflect: bool, credentials: bool
) -> tuple[Callable[[str], str | None], bool]:
    """(origin -> Allow-Origin value or None, whether the answer varies with the origin)."""
    if callable(rule):
        predicate = rule

        def by_callable(origin: str) -> str | None:
            return origin if predicate(origin) else None

        return by_callable, True
    configured = [rule] if isinstance(rule, str) else list(rule)
    if "*" in configured:
        if reflect:
            return (lambda origin: origin), True
        if credentials:
            # `*` with credentials is refused — browsers reject it, and reflecting any
            # origin with cookies would hand every site the user's session.
            return (lambda origin: None), False
        return _any_origin, False
    exact = {origin.lower(): origin for origin in configured}

    def by_list(origin: str) -> str | None:
        spelled = exact.get(origin.lower())
        if spelled is None:
            return None
        return origin if reflect else spelled

    return by_list, True
