"""`socketify systemd-unit APP`: systemd units that run `socketify run APP` as a service.

    socketify systemd-unit module:server [--name NAME] [--user U] [--group G] [--workdir DIR]
        [--venv DIR] [--bind ADDR]... [--workers N] [--graceful-timeout S] [--watchdog S]
        [--socket] [--install DIR]

`generate()` returns the text of `NAME.service` and, with `socket=True`, of `NAME.socket`. The
service is `Type=notify`: the master reports READY/RELOADING/STOPPING and feeds the watchdog
itself (`workers.supervise.systemd`).
With a socket unit, systemd owns the listening sockets and passes
them in (LISTEN_FDS), so the binds move from `ExecStart` to `ListenStream=` and connections made
while the service restarts wait in the queue instead of being refused.

The hardening leaves what a Python web app needs and little more: a read-only file system
except `/var/lib/NAME` (`StateDirectory=`), no privileges, no devices, a system call allow
list (`systemd-analyze security` rates it "OK"). It stops short of what breaks common apps
(`MemoryDenyWriteExecute=`: libffi closures; `PrivateNetwork=`); a relaxation a user needs is
one line in a drop-in (`ReadWritePaths=`).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from socketify import __version__
from socketify.command_line import Parser, UsageError
from workers.supervise.sockets import BindError, TcpAddress, UnixAddress, parse_bind

__all__ = ["UnitError", "default_name", "generate", "main"]

DEFAULT_BIND = "127.0.0.1:8080"
STOP_MARGIN = 10  # TimeoutStopSec= exceeds the graceful timeout by this much: drain, then kill
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_PLAIN_ARG = re.compile(r"[A-Za-z0-9_@%+=:,./\[\]-]+")
_HOMES = ("/home/", "/root/", "/run/user/")


class UnitError(ValueError):
    """The options cannot make a working unit; the message says which one and why."""


def generate(
    app: str,
    *,
    name: str | None = None,
    user: str | None = None,
    group: str | None = None,
    workdir: str | None = None,
    venv: str | None = None,
    binds: Sequence[str] = (),
    workers: int | None = None,
    socket: bool = False,
    graceful_timeout: float = 30.0,
    watchdog: float = 30.0,
    run_options: Sequence[str] = (),
) -> tuple[str, str | None]:
    """The text of ``NAME.service`` and, with ``socket``, of ``NAME.socket`` (else None)."""
    derived = default_name(app)  # also checks that APP looks like module:attribute
    name = name or derived
    if not _NAME.fullmatch(name):
        raise UnitError(f"invalid unit name {name!r}: use letters, digits, '.', '_' and '-'")
    if workers is not None and workers < 1:
        raise UnitError("--workers must be at least 1 (0, serving in-process, cannot notify)")
    if graceful_timeout < 0 or watchdog < 0:
        raise UnitError("timeouts must not be negative")
    workdir = os.path.abspath(workdir or os.getcwd())
    python = os.path.join(os.path.abspath(venv), "bin", "python") if venv else sys.executable
    if not python or not os.access(python, os.X_OK):
        raise UnitError(f"no Python interpreter at {python!r}")
    # Not realpath: a virtualenv's bin/python is a symlink, and resolving it leaves the venv.
    python = os.path.abspath(python)
    specs = list(binds) or [DEFAULT_BIND]
    try:
        addresses = [parse_bind(spec) for spec in specs]
    except BindError as exc:
        raise UnitError(str(exc)) from None
    command = [python, "-m", "socketify.cli", "run", app]
    if workers is not None:
        command += ["--workers", str(workers)]
    command += ["--graceful-timeout", f"{graceful_timeout:g}"]
    command += run_options  # how the app is made and served: --factory, --wsgi, --root-path...
    if not socket:
        for spec in specs:
            command += ["--bind", spec]
    for value in (*command, workdir, user or "", group or ""):
        if any(ord(char) < 0x20 for char in value):
            raise UnitError(f"{value!r}: unit settings cannot hold control characters")
    service = _service(
        name=name,
        app=app,
        command=command,
        user=user,
        group=group,
        workdir=workdir,
        stop_timeout=math.ceil(graceful_timeout) + STOP_MARGIN,
        watchdog=watchdog,
        addresses=[] if socket else addresses,
        socket=socket,
    )
    return service, _socket_unit(name, addresses, group) if socket else None


def default_name(app: str) -> str:
    """The unit name for ``app`` when none is given: its module path with dashes."""
    module = app.partition(":")[0]
    if not module or not _NAME.fullmatch(module):
        raise UnitError(f"invalid app {app!r}: expected module:attribute")
    return module.replace(".", "-").replace("_", "-")


def _service(
    *,
    name: str,
    app: str,
    command: list[str],
    user: str | None,
    group: str | None,
    workdir: str,
    stop_timeout: int,
    watchdog: float,
    addresses: list[TcpAddress | UnixAddress],
    socket: bool,
) -> str:
    after = f"network.target {name}.socket" if socket else "network.target"
    lines = [
        f"# {name}.service: generated by `socketify systemd-unit` (Socketify {__version__})",
        "[Unit]",
        f"Description=Socketify app {_setting(app)}",
        f"After={after}",
        *([f"Requires={name}.socket"] if socket else []),
        "",
        "[Service]",
        "# The master reports READY/RELOADING/STOPPING itself; its workers may not.",
        "Type=notify",
        "NotifyAccess=main",
        f"ExecStart={' '.join(_quote(arg) for arg in command)}",
        "# HUP starts fresh workers with newly imported code before the old ones drain.",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "# TERM to the master only: it drains in-flight requests (--graceful-timeout), then",
        "# stops its workers; systemd kills what is left after TimeoutStopSec.",
        "KillSignal=SIGTERM",
        "KillMode=mixed",
        f"TimeoutStopSec={stop_timeout}",
        "Restart=on-failure",
        "RestartSec=1",
        f"WatchdogSec={watchdog:g}",
        *_identity(user, group),
        f"WorkingDirectory={_setting(workdir)}",
        "Environment=PYTHONUNBUFFERED=1",
        f"SyslogIdentifier={name}",
        "LimitNOFILE=65536",
        "",
        f"# Hardening; check with `systemd-analyze security {name}.service`. The file system",
        f"# is read-only but for /var/lib/{name} ($STATE_DIRECTORY): give the app more with",
        f"# ReadWritePaths=/some/dir in a drop-in (`systemctl edit {name}`).",
        f"StateDirectory={name}",
        *_writable(addresses),
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        f"ProtectHome={_home_access(workdir, command[0])}",
        "PrivateTmp=yes",
        "PrivateDevices=yes",
        "ProtectKernelTunables=yes",
        "ProtectKernelModules=yes",
        "ProtectKernelLogs=yes",
        "ProtectControlGroups=yes",
        "ProtectClock=yes",
        "ProtectHostname=yes",
        "ProtectProc=invisible",
        "PrivateMounts=yes",
        "RestrictNamespaces=yes",
        "RestrictRealtime=yes",
        "RestrictSUIDSGID=yes",
        "LockPersonality=yes",
        "# AF_NETLINK: getaddrinfo() asks the kernel which address families are configured.",
        "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
        "SystemCallArchitectures=native",
        "SystemCallFilter=@system-service",
        "SystemCallFilter=~@privileged @resources",
        "RemoveIPC=yes",
        "UMask=0027",
        *_capabilities(addresses),
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return "\n".join(lines) + "\n"


def _socket_unit(name: str, addresses: list[TcpAddress | UnixAddress], group: str | None) -> str:
    listen = []
    for address in addresses:
        if isinstance(address, UnixAddress):
            listen.append(f"ListenStream={_setting(address.path)}")
        elif address.port == 0:
            raise UnitError(f"{address}: a socket unit needs a fixed port, not 0")
        else:
            listen.append(f"ListenStream={address}")
    unix = any(isinstance(address, UnixAddress) for address in addresses)
    ipv6_any = any(str(address).startswith("[::]:") for address in addresses)
    lines = [
        f"# {name}.socket: generated by `socketify systemd-unit` (Socketify {__version__})",
        "[Unit]",
        f"Description=Listening sockets of {name}.service",
        f"PartOf={name}.service",
        "",
        "[Socket]",
        "# systemd keeps these open across restarts of the service: clients queue, never refused.",
        *listen,
        f"FileDescriptorName={name}",
        "Backlog=2048",
        "NoDelay=true",
        # "[::]" serves IPv4 clients too, as `socketify run --bind [::]:PORT` does.
        *(["BindIPv6Only=both"] if ipv6_any else []),
        *([f"SocketGroup={group}", "SocketMode=0660"] if unix and group else []),
        "",
        "[Install]",
        "WantedBy=sockets.target",
    ]
    return "\n".join(lines) + "\n"


def _identity(user: str | None, group: str | None) -> list[str]:
    if user is None:
        # A throwaway uid: nothing on disk belongs to it, which suits a read-only service.
        return ["DynamicUser=yes", *([f"Group={group}"] if group else [])]
    return [f"User={user}", *([f"Group={group}"] if group else [])]


def _home_access(*paths: str) -> str:
    # The app or its virtualenv under /home must stay readable; otherwise hide homes entirely.
    return "read-only" if any(path.startswith(_HOMES) for path in paths) else "yes"


def _writable(addresses: list[TcpAddress | UnixAddress]) -> list[str]:
    """Where the master creates its Unix socket files (the rest of the system is read-only)."""
    lines = []
    for address in addresses:
        if not isinstance(address, UnixAddress):
            continue
        parent = Path(address.path).parent
        if parent.parent == Path("/run"):
            lines.append(f"RuntimeDirectory={parent.name}")  # created for us, owned by User=
        else:
            lines.append(f"ReadWritePaths={_setting(str(parent))}")
    return lines


def _capabilities(addresses: list[TcpAddress | UnixAddress]) -> list[str]:
    privileged = any(isinstance(a, TcpAddress) and 0 < a.port < 1024 for a in addresses)
    if privileged:
        return [
            "CapabilityBoundingSet=CAP_NET_BIND_SERVICE",
            "AmbientCapabilities=CAP_NET_BIND_SERVICE",
        ]
    return ["CapabilityBoundingSet="]


def _setting(value: str) -> str:
    # systemd expands %-specifiers in most settings; a literal % is written %%.
    return value.replace("%", "%%")


def _quote(arg: str) -> str:
    """One ExecStart= argument: plain if safe, else double-quoted with C escapes."""
    arg = _setting(arg).replace("$", "$$")
    if _PLAIN_ARG.fullmatch(arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


# -- the command ----------------------------------------------------------------------------


def _parser() -> Parser:
    parser = Parser("socketify systemd-unit", "socketify systemd-unit APP [options]")
    group = parser.add_argument_group("systemd-unit APP [options]")
    add = group.add_argument
    add("app", metavar="APP", help="what `socketify run` serves: module:attribute")
    add("--name", help="unit name (default: from the app's module, e.g. myapp-web)")
    add("--user", help="run as this user (default: a DynamicUser= made up by systemd)")
    add("--group", help="... and this group")
    add(
        "--workdir",
        metavar="DIR",
        help="working directory the app is imported from (default: here)",
    )
    add(
        "--venv",
        metavar="DIR",
        help="virtualenv whose bin/python runs the app (default: this interpreter)",
    )
    add(
        "--bind",
        action="append",
        default=[],
        metavar="ADDR",
        help=f"as for `socketify run` (default {DEFAULT_BIND}); repeat to add more",
    )
    add("--workers", type=int, metavar="N", help="worker processes (default: one per CPU)")
    add(
        "--socket",
        action="store_true",
        help="also write NAME.socket: systemd holds the sockets (socket activation)",
    )
    add(
        "--graceful-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="how long a stop lets requests finish (default 30)",
    )
    add(
        "--watchdog",
        type=float,
        default=30.0,
        metavar="S",
        help="WatchdogSec= (default 30; 0 = off)",
    )
    add(
        "--install",
        metavar="DIR",
        help="write the units into DIR (e.g. /etc/systemd/system) instead of stdout",
    )
    add("--factory", action="store_true", help="passed to `socketify run`: APP is a factory")
    add("--wsgi", action="store_true", help="passed to `socketify run`: APP is a WSGI app")
    add("--root-path", metavar="PATH", help="passed to `socketify run`: a WSGI app's SCRIPT_NAME")
    add(
        "--trust-proxy",
        action="store_true",
        help="passed to `socketify run`: a WSGI app trusts X-Forwarded-*",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """`socketify systemd-unit APP ...`: print the units, or write them with --install."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    if not args or "-h" in args or "--help" in args:
        print(parser.format_help(), file=sys.stderr if not args else sys.stdout, end="")
        return 2 if not args else 0
    try:
        options = parser.parse_args(args)
        name = options.name or default_name(options.app)
        service, socket_text = generate(
            options.app,
            name=name,
            user=options.user,
            group=options.group,
            workdir=options.workdir,
            venv=options.venv,
            binds=options.bind,
            workers=options.workers,
            socket=options.socket,
            graceful_timeout=options.graceful_timeout,
            watchdog=options.watchdog,
            run_options=_wsgi_options(options),
        )
    except (UnitError, UsageError) as exc:
        print(f"error: {exc}\n(see `socketify systemd-unit --help`)", file=sys.stderr)
        return 2
    units = {f"{name}.service": service}
    if socket_text is not None:
        units[f"{name}.socket"] = socket_text
    if options.install is None:
        print("\n".join(units.values()), end="")
        return 0
    start = f"{name}.socket" if socket_text else f"{name}.service"
    return _install(Path(options.install), units, start)


def _wsgi_options(options: argparse.Namespace) -> list[str]:
    """The `socketify run` options that say how the app is made and a WSGI app served."""
    found = ["--factory"] if options.factory else []
    if options.wsgi:
        found.append("--wsgi")
    if options.root_path:
        found += ["--root-path", options.root_path]
    if options.trust_proxy:
        found.append("--trust-proxy")
    return found


def _install(directory: Path, units: dict[str, str], start: str) -> int:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for filename, text in units.items():
            (directory / filename).write_text(text)
            print(f"wrote {directory / filename}", file=sys.stderr)
    except OSError as exc:
        print(f"error: cannot write the units: {exc}", file=sys.stderr)
        return 1
    print(f"next: systemctl daemon-reload && systemctl enable --now {start}", file=sys.stderr)
    return 0
