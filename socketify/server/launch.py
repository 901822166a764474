"""`Server.listen()`: start serving from a user's script, pre-forked or in-process.

With workers >= 1 the calling process becomes the master (`workers.supervise.master`, which never
imports gevent) and forks workers that run the already-imported app; `listen()` returns once
they all accept. With `workers=0` everything runs in this process under gevent, for debugging:
the calling process is monkey-patched, and requests are served while it blocks in `wait()`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from socketify.core.application import Application
    from socketify.server.proxy_intake import ProxyIntake
    from socketify.server.schemes import BindPlan
    from socketify.tcp.service import Service


class MasterRunner:
    """`listen()` with pre-forked workers: a thin face over `workers.supervise.master.Master`."""

    def __init__(self, app: Application, binds: list[str]) -> None:
        from socketify.server.app_worker import ServeApp
        from workers.supervise.config import MasterConfig
        from workers.supervise.master import Master

        opts = app.settings
        config = MasterConfig(
            binds=binds,
            workers=opts.workers,
            timeout=opts.timeout,
            graceful_timeout=opts.graceful_timeout,
            max_requests=opts.max_requests,
            max_requests_jitter=opts.max_requests_jitter,
            backlog=opts.backlog,
        )
        if opts.tls is not None:
            opts.tls.build_context()  # a bad certificate fails here, not in every worker
        target = ServeApp(app)
        endpoint = None
        if opts.metrics_bind is not None:
            from socketify.metrics.endpoint import MetricsEndpoint
            from socketify.metrics.worker import WorkerMetrics

            target.metrics = WorkerMetrics.create(config.record_capacity, opts.metrics_buckets)
            endpoint = MetricsEndpoint(opts.metrics_bind, target.metrics.table)
        self.metrics_address = endpoint.address if endpoint is not None else None
        self.master = Master(config, target, observer=endpoint)
        self.master.start()

    @property
    def port(self) -> int:
        """The TCP port of the first bind (resolved when it was 0)."""
        return _first_port(self.master.addresses)

    def wait(self) -> int:
        """Supervise the workers until the server stops; returns the exit status."""
        return self.master.wait()

    def stop(self) -> None:
        """Stop gracefully (as SIGTERM does)."""
        self.master.stop(graceful=True)


class InProcessRunner:
    """`listen()` with `workers=0`: one process, one gevent hub, no fork."""

    def __init__(
        self,
        app: Application | Service,
        binds: list[str],
        *,
        tls: Any = None,
        plan: BindPlan | None = None,
        http2: bool = True,
        proxy: ProxyIntake | None = None,
    ) -> None:
        from gevent import monkey

        monkey.patch_all()
        import gevent
        import gevent.event

        from socketify.drivers import make_cooperative, warn_blocking

        make_cooperative()
        warn_blocking()

        from socketify.server.app_worker import services_for_target
        from socketify.server.proxy_intake import ProxyIntake
        from workers.supervise.listeners import Listeners

        self._listeners = Listeners(binds, slots=1, backlog=app.settings.backlog)
        self.addresses = self._listeners.addresses
        sockets = self._listeners.sockets_for(0)
        settings = app.settings
        if proxy is None:
            proxy = ProxyIntake.build(settings.proxy_protocol, settings.proxy_allow)
        self.services: list[Any] = services_for_target(
            app, sockets, tls=tls or settings.tls, plan=plan, http2=http2, proxy=proxy
        )
        from socketify.tcp.service import Service
        from socketify.tracing.setup import start as start_tracing

        # Before the services start: that freezes the app, and tracing wraps its requests.
        self._tracer_provider = None if isinstance(app, Service) else start_tracing(app)
        for service in self.services:
            service.start()
        self._stopped = gevent.event.Event()
        for signum in (2, 15):  # SIGINT, SIGTERM: graceful, as in the pre-fork master
            gevent.signal_handler(signum, self.stop)

    @property
    def port(self) -> int:
        """The TCP port of the first bind (resolved when it was 0)."""
        return _first_port(self.addresses)

    def wait(self) -> int:
        """Serve until `stop()` or SIGINT/SIGTERM; returns 0."""
        self._stopped.wait()
        return 0

    def stop(self) -> None:
        """Drain in-flight requests (up to graceful_timeout), then return from `wait()`."""
        import gevent

        def drain() -> None:
            gevent.joinall([gevent.spawn(service.stop, graceful=True) for service in self.services])
            if self._tracer_provider is not None:
                self._tracer_provider.shutdown()  # exports the spans still batched
            self._listeners.close()
            self._stopped.set()

        gevent.spawn(drain)


def launch(app: Application, binds: list[str]) -> MasterRunner | InProcessRunner:
    """Serve `app` on `binds`; returns once it accepts connections."""
    if app.settings.workers == 0:
        if app.settings.metrics_bind is not None:
            raise ValueError("metrics_bind needs the pre-fork master (workers >= 1)")
        return InProcessRunner(app, binds)
    return MasterRunner(app, binds)


def _first_port(addresses: list[Any]) -> int:
    for address in addresses:
        if isinstance(address, tuple):
            return int(address[1])
    raise RuntimeError("the server listens on no TCP port")
