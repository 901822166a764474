"""The `socketify` command: the composition root that ties the app, the server and workers.

Every option is declared once, with its help text, in the parsers below; `socketify --help`
and `socketify run --help` are generated from those declarations, so the two never drift.

Nothing here imports gevent: `run` makes this process the pre-fork master, and each worker
monkey-patches itself right after the fork, before the app is imported.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from socketify import __version__
from socketify.command_line import Parser, UsageError

log = logging.getLogger("socketify.master")

DEFAULT_BIND = "127.0.0.1:8080"
DISTRIBUTION = "socketify-gevent"

USAGES = (
    "socketify run APP [options]",
    "socketify db migrate|rollback [N]|status|new NAME --app APP",
    "socketify systemd-unit APP [options]",
    "socketify --run-http DIR [options]",
    "socketify --version | --info | --help",
)

COMMANDS = (
    ("run APP", "serve APP with pre-forked workers (options below)"),
    ("db", "database migrations (`socketify db --help`)"),
    ("systemd-unit APP", "systemd units for APP (`socketify systemd-unit --help`)"),
    ("--run-http DIR", "serve the files of DIR (options below)"),
)

APP_HELP = (
    "module:attribute, or module:factory(args) to call a factory; a bare module looks for "
    "app, application or server. The attribute is a Socketify Server, a WSGI app (Flask, "
    "Django...), a socketify.tcp.Service (raw TCP) or a tcp.Bundle of a Server and TCP services"
)

OPTIONAL_FEATURES = (
    ("TLS", "ssl"),
    ("SQLite", "sqlite3"),
    ("Postgres", "psycopg2"),
    ("MySQL", "pymysql"),
    ("Redis", "redis"),
    ("Mongo", "pymongo"),
    ("Templates", "jinja2"),
    ("HTTP/2", "socketify.protocol.http2"),  # our own codec: always there
    ("Metrics", "prometheus_client"),
    ("Tracing", "opentelemetry.sdk"),
)


def _top_parser() -> Parser:
    parser = Parser("socketify", "socketify --run-http DIR [options]")
    general = parser.add_argument_group("general options")
    general.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    general.add_argument("-V", "--version", action="store_true", help="print the version")
    general.add_argument(
        "--info",
        action="store_true",
        help="the version, the installed distribution and the optional features",
    )
    group = parser.add_argument_group("--run-http options")
    group.add_argument(
        "--run-http", metavar="DIR", help="serve DIR's files, with directory listings"
    )
    group.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    group.add_argument("--port", default="8080", help="port to bind (default 8080)")
    group.add_argument(
        "--index", metavar="NAME", help="directory index file (default index.html, index.htm)"
    )
    group.add_argument(
        "--workers", type=int, default=1, metavar="N", help="worker processes (default 1)"
    )
    return parser


def _run_parser() -> Parser:
    parser = Parser("socketify run", "socketify run APP [options]")
    group = parser.add_argument_group("run APP [options]")
    add = group.add_argument
    add("app", metavar="APP", help=APP_HELP)
    add(
        "--workers",
        type=int,
        metavar="N",
        help="worker processes (default: one per CPU; 0 = serve in this process)",
    )
    add(
        "--bind",
        action="append",
        metavar="ADDR",
        help=f"HOST:PORT, [IPv6]:PORT, :PORT or unix:/path; repeat to add more (default "
        f"{DEFAULT_BIND}); prefix http:// or https:// to serve both at once (a bare ADDR "
        f"is HTTPS whenever TLS is configured)",
    )
    add(
        "--timeout",
        type=float,
        metavar="S",
        help="replace a worker silent for S seconds (default 30; 0 = never)",
    )
    add(
        "--graceful-timeout",
        type=float,
        metavar="S",
        help="how long a stop or reload lets requests finish (default 30)",
    )
    add(
        "--max-requests",
        type=int,
        metavar="N",
        help="recycle a worker after N requests (default 0 = never)",
    )
    add(
        "--max-requests-jitter",
        type=int,
        metavar="N",
        help="add up to N to --max-requests per worker",
    )
    add("--backlog", type=int, metavar="N", help="listen backlog (default 2048)")
    add("--certfile", metavar="FILE", help="serve HTTPS with this certificate chain (PEM)")
    add("--keyfile", metavar="FILE", help="... and this private key (PEM)")
    add("--ca-file", metavar="FILE", help="require client certificates signed by these CAs (mTLS)")
    add(
        "--redirect-http",
        action="store_true",
        help="http:// binds answer 308 to the same URL on the HTTPS port",
    )
    add(
        "--no-http2",
        action="store_true",
        help="serve HTTP/1.1 only (default: HTTP/2 too, h2 by ALPN over TLS and h2c with "
        "prior knowledge on plain binds)",
    )
    add(
        "--proxy-protocol",
        action="store_true",
        help="every bind expects a PROXY protocol header (v1 or v2, from HAProxy or a TCP "
        "load balancer) naming the client's address",
    )
    add(
        "--proxy-allow",
        metavar="NETS",
        help="comma-separated networks allowed to send it (default: the app's proxy_allow, "
        "else 127.0.0.0/8,::1); others are closed",
    )
    add(
        "--factory",
        action="store_true",
        help="APP names a factory: call it, without arguments, for the app",
    )
    add(
        "--wsgi",
        action="store_true",
        help="APP is a WSGI application (default: detected by its signature)",
    )
    add(
        "--root-path",
        default="",
        metavar="PATH",
        help="a WSGI app's SCRIPT_NAME: the prefix a proxy strips before us",
    )
    add(
        "--trust-proxy",
        action="store_true",
        help="a WSGI app sees X-Forwarded-For/-Proto/-Host as the client's",
    )
    add("--preload", action="store_true", help="import the app once in the master before forking")
    add(
        "--reload",
        action="store_true",
        help="restart workers when a .py file changes (development)",
    )
    add("--access-log", metavar="FILE", help="access log file (default: stderr)")
    add(
        "--access-log-format",
        choices=("dev", "common", "json"),
        metavar="F",
        help="log every request: dev, common or json (default: only what the app logs with "
        "logging.middleware)",
    )
    add("--error-log", metavar="FILE", help="error log file (default: stderr)")
    add(
        "--log-level",
        default="info",
        metavar="LEVEL",
        help="debug, info, warning, error (default: info)",
    )
    add(
        "--metrics-bind",
        metavar="ADDR",
        help="serve /metrics (Prometheus), /healthz and /readyz from the master on this private "
        "HOST:PORT, summed over all workers (default: off)",
    )
    add(
        "--metrics-buckets",
        metavar="LIST",
        help="request duration histogram bounds in seconds, comma-separated",
    )
    return parser


def help_text() -> str:
    """`socketify --help`: every command, then the options of `run` and `--run-http`."""
    usage = "usage: " + "\n       ".join(USAGES)
    width = max(len(name) for name, _ in COMMANDS) + 4
    commands = "\n".join(f"  {name:<{width}}{summary}" for name, summary in COMMANDS)
    sections = [usage, "commands:\n" + commands]
    for parser in (_run_parser(), _top_parser()):
        # Each parser's own usage line is already in the list above.
        sections.append(parser.format_help().partition("\n\n")[2].strip("\n"))
    return "\n\n".join(sections) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `socketify` console script; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(args)
    except UsageError as exc:
        print(f"error: {exc}\n(see `{exc.usage}`)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _main(args: list[str]) -> int:
    if not args:
        print(help_text(), file=sys.stderr, end="")
        return 2
    if args[0] == "run":
        return run(_parse_run(args[1:]))
    if args[0] == "db":
        from socketify.db.cli import main as db_main

        return db_main(args[1:])
    if args[0] == "systemd-unit":
        from socketify.systemd_unit import main as systemd_unit_main

        return systemd_unit_main(args[1:])
    options = _top_parser().parse_args(args)
    if options.help:
        print(help_text(), end="")
        return 0
    if options.version:
        print(f"Socketify {__version__}")
        return 0
    if options.info:
        print(info())
        return 0
    if options.run_http:
        return run_http(options)
    raise UsageError(f"unknown command: {args[0]}")


def _parse_run(args: list[str]) -> argparse.Namespace:
    parser = _run_parser()
    if "-h" in args or "--help" in args:
        print(parser.format_help(), end="")
        raise SystemExit(0)
    return parser.parse_args(args)


def info() -> str:
    """`--info`: the version, its distribution, the optional features, the compiled modules.

    The import name `socketify` is shared with socketify.py (distribution `socketify`); the
    second line says which distribution this code came from, and warns when both are installed.
    """
    from socketify.compiled import compiled_modules

    lines = [f"Socketify {__version__}", distribution_line()]
    for label, module in OPTIONAL_FEATURES:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # a dotted name whose parent package is missing
            found = False
        lines.append(f"{label}: {'yes' if found else 'no'}")
    compiled = compiled_modules()
    lines.append(f"Compiled: {', '.join(compiled) if compiled else 'no (pure Python)'}")
    return "\n".join(lines)


def distribution_line() -> str:
    """`Distribution: socketify-gevent 0.1.0 (/path/to/socketify)`, plus any shadowing."""
    here = os.path.dirname(os.path.abspath(__file__))
    owners = importlib.metadata.packages_distributions().get("socketify", [])
    line = f"Distribution: {DISTRIBUTION if DISTRIBUTION in owners else 'none found'} ({here})"
    others = sorted(set(owners) - {DISTRIBUTION})
    if others:
        line += (
            f"; warning: {', '.join(others)} also installs the import name 'socketify', "
            "and whichever was installed last wins"
        )
    return line


# -- run ------------------------------------------------------------------------------------------


def run(options: argparse.Namespace) -> int:
    """`socketify run APP`: become the master of pre-forked workers serving APP."""
    configure_logging(options.log_level, options.error_log, options.access_log)
    from socketify.core.templates import RELOAD_ENV
    from socketify.core.tls_options import TlsError, TlsOptions
    from socketify.server.app_worker import (
        AppLoadError,
        ServeApp,
        WsgiOptions,
        add_access_log,
        load_app,
        tcp_binds,
    )
    from socketify.server.schemes import BindPlan, SchemeError
    from workers.supervise.sockets import BindError

    if options.reload:
        # The workers inherit it: their templates are checked for edits on every use.
        os.environ[RELOAD_ENV] = "1"
    target: Any
    settings: Any
    try:
        tls = _tls_options(options)
        if options.root_path and not options.root_path.startswith("/"):
            raise UsageError(f"--root-path must start with '/': {options.root_path}")
        wsgi = WsgiOptions(options.wsgi, options.root_path, options.trust_proxy)
        if options.preload or options.workers == 0:
            app = load_app(options.app, wsgi, options.factory)
            settings = app.settings
        else:
            _check_importable(options.app)
            app, settings = None, _probe_settings(options.app, wsgi, options.factory)
        if tls is None and not settings.tls:
            # The environment only stands in for an app without TLS of its own: replacing
            # the app's options would silently drop its SNI certificates or its mTLS.
            tls = TlsOptions.from_env()
        plan = BindPlan.parse(
            options.bind or ["127.0.0.1:8080"],
            tls=tls is not None or bool(settings.tls),
            redirect_http=options.redirect_http,
        )
        target = ServeApp(
            options.app if app is None else app,
            tls=tls,
            plan=plan,
            access_log_format=options.access_log_format,
            http2=not options.no_http2,
            proxy_protocol=options.proxy_protocol,
            proxy_allow=_proxy_allow(options.proxy_allow),
            wsgi=wsgi,
            factory=options.factory,
        )
        tls = tls or (app.settings.tls if app is not None else None)
        if tls is not None:
            tls.build_context()  # fail here, in one line, rather than in every worker
        if app is not None:
            target.proxy_for(app)  # the same for the binds listed in proxy_protocol
    except (AppLoadError, ModuleNotFoundError) as exc:
        _load_error(options.app, str(exc))
        return 1
    except _ProbeFailed as exc:
        return exc.status
    except (TlsError, BindError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except SchemeError as exc:
        raise UsageError(str(exc)) from None
    # A tcp.Bundle's TCP services bring their own binds beside the command line's.
    binds = [*plan.binds, *tcp_binds(app if app is not None else settings)]
    metrics_bind = options.metrics_bind or getattr(settings, "metrics_bind", None) or None
    if options.workers == 0 and metrics_bind:
        raise UsageError("--metrics-bind needs the pre-fork master (--workers 1 or more)")
    if options.workers == 0:
        if options.access_log_format:
            add_access_log(getattr(target.app, "http", target.app), options.access_log_format)
        return _run_in_process(
            target.app, binds, target.tls, plan, target.http2, target.proxy_for(app)
        )
    return _run_master(options, target, settings, binds)


def _proxy_allow(value: str | None) -> tuple[str, ...] | None:
    """--proxy-allow's networks, checked here so a typo fails before any worker starts."""
    if value is None:
        return None
    from socketify.core.options import ServerOptions

    try:
        return tuple(ServerOptions(proxy_allow=value).proxy_allow)
    except ValueError as exc:
        raise UsageError(f"--proxy-allow: {exc}") from None


def _tls_options(options: argparse.Namespace) -> Any:
    """TlsOptions from --certfile/--keyfile/--ca-file, or None."""
    from socketify.core.tls_options import TlsError, TlsOptions

    if options.certfile or options.keyfile:
        if not (options.certfile and options.keyfile):
            raise TlsError("--certfile and --keyfile go together")
        return TlsOptions(
            cert_file=options.certfile,
            key_file=options.keyfile,
            ca_file=options.ca_file,
            client_auth="required" if options.ca_file else "none",
        )
    if options.ca_file:
        raise TlsError("--ca-file needs --certfile and --keyfile")
    return None


def _load_error(spec: str, message: str) -> None:
    """One line saying what failed, one saying what APP may be."""
    print(f"error: cannot load app {spec!r}: {message}", file=sys.stderr)
    print(
        "hint: APP is module, module:attribute or module:factory(args), imported from the "
        "current folder "
        "(`socketify run --help` lists what it may name)",
        file=sys.stderr,
    )


class _ProbeFailed(Exception):
    """The app could not be imported; what went wrong is already on stderr."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _probe_settings(spec: str, wsgi: Any, factory: bool) -> SimpleNamespace:
    """The Server's own options, read by importing APP in a throwaway interpreter.

    Its warnings are not shown: each worker imports APP again and shows them there.
    """
    import dataclasses
    import json
    import subprocess

    from socketify.server.app_worker import PROBE_LOAD_ERROR

    code = (
        "import json, sys\n"
        "from socketify.server.app_worker import WsgiOptions, probe_app\n"
        "probe_app(sys.argv[1], WsgiOptions(**json.loads(sys.argv[2])), sys.argv[3] == '1')"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])),
    }
    arguments = [spec, json.dumps(dataclasses.asdict(wsgi)), "1" if factory else "0"]
    result = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code, *arguments],
        stdout=subprocess.PIPE,
        env=env,
        check=False,
    )
    if result.returncode == PROBE_LOAD_ERROR:
        _load_error(spec, json.loads(result.stdout)["error"])
        raise _ProbeFailed(1)
    if result.returncode != 0:
        print("error: the app failed to import; see the traceback above", file=sys.stderr)
        raise _ProbeFailed(3)
    return SimpleNamespace(**json.loads(result.stdout))


def _check_importable(spec: str) -> None:
    """Fail fast, in one line, on an APP whose module does not exist (without importing it)."""
    module = spec.partition(":")[0]
    if not module:
        raise ModuleNotFoundError(f"invalid app {spec!r}: expected module or module:name")
    if "" not in sys.path:
        sys.path.insert(0, "")
    if importlib.util.find_spec(module) is None:
        raise ModuleNotFoundError(f"no module named {module!r}")


def _run_master(options: argparse.Namespace, target: Any, settings: Any, binds: list[str]) -> int:
    from socketify.server.app_worker import serves_tcp
    from workers.supervise.config import MasterConfig
    from workers.supervise.master import BootError, Master
    from workers.supervise.sockets import BindError, format_address

    def pick(flag: Any, name: str) -> Any:
        return flag if flag is not None else getattr(settings, name)

    try:
        config = MasterConfig(
            binds=binds,
            workers=pick(options.workers, "workers"),
            timeout=pick(options.timeout, "timeout"),
            graceful_timeout=pick(options.graceful_timeout, "graceful_timeout"),
            max_requests=pick(options.max_requests, "max_requests"),
            max_requests_jitter=pick(options.max_requests_jitter, "max_requests_jitter"),
            backlog=pick(options.backlog, "backlog"),
            reload=options.reload,
        )
        endpoint, target.metrics = _metrics(options, settings, config)
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    except BindError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    master = Master(config, target, observer=endpoint)
    try:
        master.start()
    except BindError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BootError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    http2 = target.http2 and getattr(settings, "http2", False)
    where = _where(master.addresses, bool(target.tls or settings.tls), target.plan, http2)
    if serves_tcp(settings):
        where = _where_tcp(master.addresses, bool(target.tls or settings.tls))
    elif len(master.addresses) > len(target.plan.binds):  # a tcp.Bundle's TCP binds follow
        http_count = len(target.plan.binds)
        where = ", ".join(
            [
                _where(
                    master.addresses[:http_count],
                    bool(target.tls or settings.tls),
                    target.plan,
                    http2,
                ),
                _where_tcp(master.addresses[http_count:], False),
            ]
        )
    log.info(
        "Socketify %s listening on %s (%s, master pid %d)",
        __version__,
        where,
        _count(master.worker_count, "worker"),
        os.getpid(),
    )
    if endpoint is not None:
        log.info("metrics and health on %s", _url(format_address(endpoint.address)))
    return master.wait()


def _metrics(options: argparse.Namespace, settings: Any, config: Any) -> tuple[Any, Any]:
    """The master's metrics endpoint and the workers' part of it; (None, None) when off."""
    bind = options.metrics_bind or getattr(settings, "metrics_bind", None)
    if not bind:
        return None, None
    try:
        from socketify.metrics.endpoint import MetricsEndpoint
    except ImportError as exc:
        raise UsageError(
            f"--metrics-bind needs prometheus_client ({exc}): "
            "pip install 'socketify-gevent[metrics]'"
        ) from None
    from socketify.metrics.worker import WorkerMetrics, parse_buckets

    buckets = getattr(settings, "metrics_buckets", None) or None
    if options.metrics_buckets:
        try:
            buckets = parse_buckets(options.metrics_buckets)
        except ValueError as exc:
            raise UsageError(f"--metrics-buckets: {exc}") from None
    workers = WorkerMetrics.create(config.record_capacity, buckets)
    return MetricsEndpoint(bind, workers.table), workers


def _run_in_process(
    app: Any,
    binds: list[str],
    tls: Any = None,
    plan: Any = None,
    http2: bool = True,
    proxy: Any = None,
) -> int:
    from socketify.server.launch import InProcessRunner
    from workers.supervise.sockets import BindError

    try:
        runner = InProcessRunner(app, binds, tls=tls, plan=plan, http2=http2, proxy=proxy)
    except BindError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    from socketify.server.app_worker import serves_tcp

    where = _where(
        runner.addresses,
        bool(tls or app.settings.tls),
        plan,
        http2 and getattr(app.settings, "http2", False),
    )
    if serves_tcp(app.settings):
        where = _where_tcp(runner.addresses, bool(tls or app.settings.tls))
    log.info("Socketify %s listening on %s (in-process, pid %d)", __version__, where, os.getpid())
    return runner.wait()


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _where(addresses: list[Any], tls: bool, plan: Any, http2: bool = False) -> str:
    """The bound addresses as URLs, each with its own scheme (see server.schemes) and the
    protocols it speaks: `https://127.0.0.1:8443 (h2, http/1.1)`."""
    from workers.supervise.sockets import format_address

    def scheme(address: Any) -> str:
        return "https" if tls and not (plan is not None and plan.is_plain(address)) else "http"

    def protocols(scheme: str) -> str:
        if not http2:
            return "(http/1.1)"
        return "(h2, http/1.1)" if scheme == "https" else "(http/1.1, h2c)"

    return ", ".join(
        f"{_url(format_address(address), scheme(address))} {protocols(scheme(address))}"
        for address in addresses
    )


def _where_tcp(addresses: list[Any], tls: bool) -> str:
    """The bound addresses of a TCP service: `tcp://127.0.0.1:7000` (`tls://` with TLS)."""
    from workers.supervise.sockets import format_address

    return ", ".join(
        _url(format_address(address), "tls" if tls else "tcp") for address in addresses
    )


def _url(address: str, scheme: str = "http") -> str:
    return address if address.startswith("unix:") else f"{scheme}://{address}"


# -- run-http --------------------------------------------------------------------------------------


def run_http(options: argparse.Namespace) -> int:
    """`--run-http DIR`: serve a directory (listing on, no fallthrough), logging requests."""
    directory = os.path.abspath(options.run_http)
    if not os.path.isdir(directory):
        print(f"error: not a directory: {options.run_http}", file=sys.stderr)
        return 1
    if not options.port.isdigit() or not 1 <= int(options.port) <= 65535:
        raise UsageError(f"invalid --port: {options.port}")
    configure_logging("info", None, None)
    from socketify import Server, static_files
    from socketify.middleware import access_log as access_logging

    server = Server(workers=options.workers)
    server.use(access_logging.middleware(format="dev"))
    index_names = (options.index,) if options.index else ("index.html", "index.htm")
    server.use(
        static_files.serve(
            directory, fallthrough=False, directory_listing=True, index_names=index_names
        )
    )
    host = options.host
    binds = [f"[{host}]:{options.port}" if ":" in host else f"{host}:{options.port}"]
    print(f"Serving {directory} on http://{host}:{options.port}", flush=True)
    from workers.supervise.sockets import BindError

    try:
        if options.workers == 0:
            return _run_in_process(server, binds)
        from socketify.server.app_worker import ServeApp
        from workers.supervise.config import MasterConfig
        from workers.supervise.master import Master

        master = Master(MasterConfig(binds=binds, workers=options.workers), ServeApp(server))
        master.start()
    except BindError:
        print(f"error: failed to bind {host}:{options.port}", file=sys.stderr)
        return 1
    return master.wait()


# -- logging --------------------------------------------------------------------------------------


def configure_logging(level: str, error_log: str | None, access_log: str | None) -> None:
    """Error and access logs to stderr (journald-friendly) or to files reopened on USR1."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise UsageError(f"invalid --log-level: {level}")
    # Under systemd, journald stamps every line itself.
    stamp = "" if os.environ.get("JOURNAL_STREAM") else "[%(asctime)s] "
    error_handler: logging.Handler = (
        logging.FileHandler(error_log) if error_log else logging.StreamHandler(sys.stderr)
    )
    error_handler.setFormatter(
        logging.Formatter(f"{stamp}[%(process)d] [%(levelname)s] %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [error_handler]
    root.setLevel(numeric)
    access = logging.getLogger("socketify.access")
    # PERF: one write(2) per line and no lock (an access line is the message as it is).
    from socketify.middleware.log_handlers import AccessLogFileHandler, AccessLogHandler

    access_handler: logging.Handler = (
        AccessLogFileHandler(access_log) if access_log else AccessLogHandler(sys.stderr)
    )
    access.handlers[:] = [access_handler]
    access.propagate = False
    access.setLevel(logging.INFO)


if __name__ == "__main__":
    sys.exit(main())
