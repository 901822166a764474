"""What each worker process runs: load the app, serve it, drain on stop.

Imported by the master (it names `serve_app` as the workers' target), so gevent and the
serving modules are imported inside the function, in the worker, after monkey-patching.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from socketify.server.app_target import AppLoadError, AppTarget, find_app, import_module

if TYPE_CHECKING:
    from socketify.core.application import Application
    from socketify.core.tls_options import TlsOptions
    from socketify.metrics.worker import WorkerMetrics
    from socketify.server.proxy_intake import ProxyIntake
    from socketify.server.schemes import BindPlan
    from socketify.server.service import HttpService
    from socketify.server.tcp_service import TcpService
    from socketify.tcp.bundle import Bundle
    from socketify.tcp.service import Service
    from workers.supervise.context import WorkerContext


class _AppImport:
    """Whether this process is importing an APP module for `socketify run` right now."""

    __slots__ = ("active",)

    def __init__(self) -> None:
        self.active = False


_app_import = _AppImport()


def importing_app() -> bool:
    """True while `load_app` imports the app's module (a module-level `app.run()` returns)."""
    return _app_import.active


@dataclass(frozen=True)
class WsgiOptions:
    """How `socketify run` serves a WSGI app: `--wsgi` (no detection), `--root-path`
    (the SCRIPT_NAME a proxy strips) and `--trust-proxy` (its X-Forwarded-* headers)."""

    forced: bool = False
    root_path: str = ""
    trust_proxy: bool = False


def load_app(
    spec: str, wsgi: WsgiOptions | None = None, factory: bool = False
) -> Application | Service | Bundle:
    """Import the app `spec` names (see `app_target`): a Server, a tcp.Service, or a
    tcp.Bundle of both.

    A WSGI application (detected by its `(environ, start_response)` signature, or any
    callable with `--wsgi`) is served at "/" by a Server of its own; a callable taking no
    arguments is a factory of any of them, as is the target with `factory` (`--factory`).
    """
    from socketify.core.application import Application
    from socketify.tcp.bundle import Bundle
    from socketify.tcp.service import Service
    from socketify.wsgi import looks_like_wsgi

    wsgi = wsgi or WsgiOptions()
    served = (Application, Service, Bundle)
    target = AppTarget.parse(spec)
    _app_import.active = True
    try:
        module = import_module(target.module)
    finally:
        _app_import.active = False
    app: Any = find_app(module, target, factory)
    if isinstance(app, served):
        return app
    if looks_like_wsgi(app) or (wsgi.forced and callable(app)):
        return _wsgi_server(app, wsgi)
    if callable(app) and target.args is None and not factory:
        app = app()  # an app factory
    if isinstance(app, served):
        return app
    if looks_like_wsgi(app) or (wsgi.forced and callable(app)):
        return _wsgi_server(app, wsgi)
    raise AppLoadError(
        f"{spec} is a {type(app).__name__}, neither a socketify Server, a WSGI application"
        " nor a tcp.Service"
    )


def _wsgi_server(app: Any, wsgi: WsgiOptions) -> Application:
    """A server that is the WSGI `app`; it compresses nothing, as gunicorn.

    The app answers every request from a global middleware hook, ahead of a routing that
    has nothing to route: a request costs no route lookup.
    """
    from socketify.core.application import Application
    from socketify.core.chain import hooked
    from socketify.wsgi import WsgiHandler
    from socketify.wsgi.django_logs import print_django_records_once

    print_django_records_once()
    server = Application(trust_proxy=wsgi.trust_proxy, compression=False)
    handler = WsgiHandler(app, "", wsgi.root_path)
    server.use(hooked(before=handler.answer_all, name="wsgi"))
    return server


def serves_tcp(settings: Any) -> bool:
    """Whether an app's settings (or what `probe_app` printed of them) are a TCP service's."""
    return bool(getattr(settings, "tcp", False))


PROBE_LOAD_ERROR = 4  # exit status of `probe_app` for an APP that names no Server
_PROBED = (
    "workers",
    "timeout",
    "graceful_timeout",
    "max_requests",
    "max_requests_jitter",
    "backlog",
    "http2",
    "metrics_bind",
    "metrics_buckets",
)


def probe_app(spec: str, wsgi: WsgiOptions | None = None, factory: bool = False) -> None:
    """Entry point run in a throwaway interpreter: print the app's master-side settings.

    The master must not import the app itself (forked workers would inherit the module and
    a HUP could not load new code), yet it needs the Server's own options (workers,
    timeouts, backlog). Prints them as JSON; a bad APP exits PROBE_LOAD_ERROR with one line.
    """
    import json

    from socketify.core.tls_options import TlsError
    from socketify.server.proxy_intake import ProxyIntake
    from socketify.tcp.bundle import Bundle
    from socketify.tcp.service import Service
    from workers.supervise.sockets import BindError

    module = spec.partition(":")[0]
    try:
        # stdout carries the answer: what the module prints while it loads (a banner, a
        # line after a module-level `app.run()`) goes to stderr.
        with contextlib.redirect_stdout(sys.stderr):
            app = load_app(spec, wsgi, factory)
        if app.settings.tls is not None:
            app.settings.tls.build_context()
        ProxyIntake.build(app.settings.proxy_protocol, app.settings.proxy_allow)
    except ModuleNotFoundError as exc:
        if not exc.name or not (module == exc.name or module.startswith(exc.name + ".")):
            raise  # a module the app imports is missing: the traceback says where
        print(json.dumps({"error": str(exc)}))
        raise SystemExit(PROBE_LOAD_ERROR) from None
    except (AppLoadError, TlsError, BindError) as exc:
        print(json.dumps({"error": str(exc)}))
        raise SystemExit(PROBE_LOAD_ERROR) from None
    settings = {name: getattr(app.settings, name, False) for name in _PROBED}
    settings["tls"] = app.settings.tls is not None
    settings["tcp"] = isinstance(app, Service)
    settings["tcp_binds"] = app.tcp_binds if isinstance(app, Bundle) else []
    print(json.dumps(settings))


def add_access_log(app: Application, log_format: str) -> None:
    """Log every request of `app` to `socketify.access` (the `--access-log-format` flag)."""
    from socketify.middleware import access_log as access_logging

    app.use(
        access_logging.middleware(format=log_format, trust_proxy=app.settings.trust_proxy),
        first=True,
    )


def tcp_binds(app: Any) -> list[str]:
    """The binds a tcp.Bundle's TCP services add to the command line's (none otherwise).

    `app` is the loaded app or, when the master did not import it, its probed settings.
    """
    return list(getattr(app, "tcp_binds", None) or [])


def services_for_target(
    app: Application | Service | Bundle,
    sockets: list[Any],
    *,
    tls: TlsOptions | None,
    plan: BindPlan | None,
    on_request: Any = None,
    http2: bool = True,
    proxy: ProxyIntake | None = None,
) -> list[HttpService | TcpService]:
    """What serves `app` on `sockets` in this worker: HTTP services and TCP services.

    `proxy` says which binds expect a PROXY protocol header; a Bundle's TCP services follow
    their own options instead.
    """
    from socketify.server.schemes import services_for
    from socketify.server.tcp_service import TcpService
    from socketify.tcp.bundle import Bundle
    from socketify.tcp.service import Service

    if isinstance(app, Service):
        return [TcpService(app, sockets, tls=tls, on_connection=on_request, proxy=proxy)]
    if not isinstance(app, Bundle):
        return [
            *services_for(
                app, sockets, tls=tls, plan=plan, on_request=on_request, http2=http2, proxy=proxy
            )
        ]
    by_service: dict[Service, list[Any]] = {}
    http_sockets = []
    for sock in sockets:
        service = app.service_for(sock.getsockname())
        if service is None:
            http_sockets.append(sock)
        else:
            by_service.setdefault(service, []).append(sock)
    services: list[HttpService | TcpService] = [
        TcpService(service, socks, tls=service.settings.tls)
        for service, socks in by_service.items()
    ]
    if http_sockets:
        services += services_for(
            app.http,
            http_sockets,
            tls=tls,
            plan=plan,
            on_request=on_request,
            http2=http2,
            proxy=proxy,
        )
    return services


class ServeApp:
    """The workers' target: `ServeApp(app_or_spec)(ctx)` serves until the master stops us.

    `tls` (TlsOptions from the command line) overrides the app's own `tls` setting; `plan`
    says which binds serve plain HTTP beside it (`--bind http://...`, see server.schemes);
    `access_log_format` ("dev", "common" or "json") logs every request from the command line;
    `http2=False` turns HTTP/2 off (`--no-http2`); `wsgi` says how a WSGI app is served;
    `factory=True` calls the target to make the app (`--factory`);
    `proxy_protocol=True` makes every bind expect a PROXY protocol header
    (`--proxy-protocol`), from the networks in `proxy_allow` (`--proxy-allow`, else the app's
    own `proxy_allow`); `metrics` makes each worker record into the master's tally.
    """

    def __init__(
        self,
        app: Application | Service | Bundle | str,
        *,
        tls: TlsOptions | None = None,
        plan: BindPlan | None = None,
        access_log_format: str | None = None,
        http2: bool = True,
        proxy_protocol: bool = False,
        proxy_allow: tuple[str, ...] | None = None,
        wsgi: WsgiOptions | None = None,
        factory: bool = False,
        metrics: WorkerMetrics | None = None,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.wsgi = wsgi
        self.factory = factory
        self.tls = tls
        self.plan = plan
        self.access_log_format = access_log_format
        self.http2 = http2
        self.proxy_protocol = proxy_protocol
        self.proxy_allow = proxy_allow

    def proxy_for(self, app: Application | Service | Bundle) -> ProxyIntake | None:
        """The PROXY protocol settings: the command line's over the app's own options.

        For a tcp.Bundle, the command line's apply to its HTTP binds; its TCP services
        follow their own options.
        """
        from socketify.server.proxy_intake import ProxyIntake

        settings = app.settings
        return ProxyIntake.build(
            True if self.proxy_protocol else settings.proxy_protocol,
            self.proxy_allow if self.proxy_allow is not None else settings.proxy_allow,
        )

    def __call__(self, ctx: WorkerContext) -> None:
        import gevent

        from socketify.drivers import make_cooperative, warn_blocking
        from socketify.server.metrics_sampler import sample_forever
        from socketify.server.wire_meter import WireMeter
        from socketify.tcp.bundle import Bundle
        from socketify.tcp.service import Service
        from socketify.tracing.setup import start as start_tracing

        make_cooperative()  # before the app imports its drivers
        first = ctx.worker_id == 0
        with warnings.catch_warnings():
            if not first:
                # Every worker imports the same code: worker 0 shows what it warns about.
                warnings.simplefilter("ignore")
            app = (
                load_app(self.app, self.wsgi, self.factory)
                if isinstance(self.app, str)
                else self.app
            )
        if first:
            warn_blocking()  # once per start, not once per worker
        # What the app's import made lives as long as the worker: out of the collector's
        # sight, a full collection scans only what requests made, not every module's objects.
        gc.freeze()
        if self.access_log_format and not isinstance(app, Service):
            add_access_log(app.http if isinstance(app, Bundle) else app, self.access_log_format)
        recorder = self.metrics.start(app, ctx.record) if self.metrics is not None else None
        tracer_provider = None if isinstance(app, Service) else start_tracing(app)
        tls = self.tls or app.settings.tls
        services = services_for_target(
            app,
            ctx.sockets,
            tls=tls,
            plan=self.plan,
            on_request=ctx.request_done,
            http2=self.http2,
            proxy=self.proxy_for(app),
        )
        if recorder is not None:
            meter = WireMeter(recorder)
            for service in services:
                service.acceptor.meter = meter  # counts a connection's bytes as it goes
            gevent.spawn(sample_forever, services, recorder, meter)
        for service in services:
            service.start()
            ctx.on_stop(service.stop_accepting)
        ctx.ready()
        ctx.wait_stop()
        # Side by side, so an HTTP and an HTTPS service share one graceful_timeout.
        gevent.joinall(
            [
                gevent.spawn(service.stop, graceful=ctx.graceful, timeout=ctx.graceful_timeout)
                for service in services
            ]
        )
        if tracer_provider is not None:
            tracer_provider.shutdown()  # exports the spans still batched
