"""Per-bind schemes: one server on HTTPS and plain HTTP at once, optionally redirecting.

    socketify run app:server --certfile C --keyfile K \\
        --bind https://0.0.0.0:8443 --bind http://0.0.0.0:8080 --redirect-http

A bind spec may start with `https://` or `http://`. A bare spec keeps the server-wide rule
(HTTPS when TLS is configured, plain HTTP otherwise), so existing command lines mean what they
did. The master only ever sees bare specs: `workers` knows nothing of schemes. Each worker
sorts its listening sockets by their bound address into one `HttpService` with TLS and one
without; with `--redirect-http` the plain one runs a one-middleware app that answers every
request with 308 (method and body kept) to the same target on the first HTTPS port.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from workers.supervise.sockets import TcpAddress, UnixAddress, parse_bind

if TYPE_CHECKING:
    from socketify.core.application import Application
    from socketify.core.request import Request
    from socketify.core.response import Response
    from socketify.server.proxy_intake import ProxyIntake
    from socketify.server.service import HttpService

__all__ = ["BindPlan", "SchemeError", "redirect_app", "services_for"]

_HTTPS, _HTTP = "https://", "http://"
# A reg-name or IPv4 address, or a bracketed IPv6 literal, then an optional port: anything
# else in Host must not end up in the Location we send back.
_HOST = re.compile(r"([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]*)?")


class SchemeError(ValueError):
    """Bind schemes that cannot be honoured (https:// without TLS, a redirect to nowhere)."""


@dataclass(frozen=True)
class BindPlan:
    """Bare bind specs for the master, and which of them serve plain HTTP beside TLS."""

    binds: tuple[str, ...]
    plain: tuple[str, ...] = ()  # `http://` binds of a server that has TLS
    redirect_http: bool = False

    @classmethod
    def parse(cls, specs: Sequence[str], *, tls: bool, redirect_http: bool = False) -> BindPlan:
        """Strip the scheme prefixes; `tls` says whether the server has TLS options."""
        bare: list[str] = []
        plain: list[str] = []
        secure: list[str] = []
        for spec in specs:
            lowered = spec.lower()
            if lowered.startswith(_HTTPS):
                if not tls:
                    raise SchemeError(f"--bind {spec} needs TLS: give --certfile and --keyfile")
                spec = spec[len(_HTTPS) :]
                secure.append(spec)
            elif lowered.startswith(_HTTP):
                spec = spec[len(_HTTP) :]
                if tls:
                    plain.append(spec)
            elif tls:
                secure.append(spec)
            bare.append(spec)
        if redirect_http and not (plain and secure):
            raise SchemeError("--redirect-http needs an http:// bind beside an HTTPS one")
        plan = cls(tuple(bare), tuple(plain), redirect_http)
        plan._check_distinguishable(secure)
        return plan

    @cached_property
    def _plain_addresses(self) -> list[TcpAddress | UnixAddress]:
        return [parse_bind(spec) for spec in self.plain]

    def _check_distinguishable(self, secure: list[str]) -> None:
        # Workers tell sockets apart by address; two port-0 binds on one host look alike.
        for address in map(parse_bind, secure if self.plain else ()):
            for other in self._plain_addresses:
                if (
                    isinstance(address, TcpAddress)
                    and isinstance(other, TcpAddress)
                    and address.host == other.host
                    and 0 in (address.port, other.port)
                ):
                    raise SchemeError("http:// and https:// binds on one host need ports")

    def is_plain(self, bound: Any) -> bool:
        """Whether a bound address (`getsockname()` or a master address) is an http:// one."""
        from socketify.server.proxy_intake import bound_matches

        return any(bound_matches(bound, address) for address in self._plain_addresses)


def services_for(
    app: Application,
    sockets: list[Any],
    *,
    tls: Any,
    plan: BindPlan | None,
    on_request: Callable[[], Any] | None = None,
    http2: bool = True,
    proxy: ProxyIntake | None = None,
) -> list[HttpService]:
    """The HttpServices that serve `sockets`: with TLS, and plain (the app or the redirect).

    `http2=False` turns HTTP/2 off whatever the app's options say (`--no-http2`); `proxy`
    says which binds expect a PROXY protocol header (see `server.proxy_intake`).
    """
    from socketify.server.service import HttpService

    if tls is None or plan is None or not plan.plain:
        return [HttpService(app, sockets, on_request=on_request, tls=tls, http2=http2, proxy=proxy)]
    plain = [sock for sock in sockets if plan.is_plain(sock.getsockname())]
    secure = [sock for sock in sockets if sock not in plain]
    services = []
    if secure:
        services.append(
            HttpService(app, secure, on_request=on_request, tls=tls, http2=http2, proxy=proxy)
        )
    if plain:
        if plan.redirect_http:
            ports = [sock.getsockname() for sock in secure if sock.family != socket.AF_UNIX]
            app = redirect_app(app, ports[0][1] if ports else None)
        services.append(HttpService(app, plain, on_request=on_request, http2=http2, proxy=proxy))
    return services


def redirect_app(app: Application, https_port: int | None) -> Application:
    """An app with `app`'s limits and timeouts that sends everything to HTTPS with a 308."""
    from socketify.core.application import Application

    settings = app.settings
    options = {field.name: getattr(settings, field.name) for field in fields(settings)}
    redirector = Application(**{**options, "tls": None, "compression": False})
    suffix = "" if https_port in (None, 443) else f":{https_port}"

    def to_https(req: Request, res: Response, next: Callable[[], None]) -> None:
        host = _hostname(req.header("host"))
        if host is None:
            res.status(400).send("Bad Request: no usable Host header to redirect to HTTPS\n")
            return
        target = req.raw_target
        if not target.startswith("/"):  # absolute-form keeps its path and query; `*` is "/"
            parts = urlsplit(target)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            target = target if target.startswith("/") else "/"
        res.redirect(f"https://{host}{suffix}{target}", 308)

    redirector.use(to_https)
    return redirector


def _hostname(host: str) -> str | None:
    """Host without its port (`example.com:80` -> `example.com`); None if unusable in a URL."""
    match = _HOST.fullmatch(host)
    return match[1] if match else None
